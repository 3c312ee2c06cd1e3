"""A page of the real service in Chromium, watched: every request it makes, its console errors, page errors and CSP
violations, so that each test can end by asserting that nothing left loopback and nothing went wrong."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

WAIT_MS = 30_000  # one condition on the page (a /predict may take a second on a busy CPU)


class Watch:
    """Every request a page makes, its console errors, page errors and CSP violations."""

    def __init__(self, page: Any) -> None:
        self.urls: list[str] = []
        self.errors: list[str] = []
        self.predict_inflight = 0
        self.predict_max_inflight = 0
        self.predict_count = 0
        page.on("request", self._request)
        page.on("requestfinished", self._done)
        page.on("requestfailed", self._failed)
        page.on("console", lambda m: m.type == "error" and self.errors.append(f"console: {m.text}"))
        page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        # Runs before the page's own scripts (injected by the browser, outside the page's CSP).
        page.add_init_script("""
            document.addEventListener('securitypolicyviolation', (e) => {
                console.error('CSP violation: ' + e.violatedDirective + ' ' + e.blockedURI);
            });
        """)

    def _request(self, req: Any) -> None:
        self.urls.append(req.url)
        if urlsplit(req.url).path == "/predict":
            self.predict_count += 1
            self.predict_inflight += 1
            self.predict_max_inflight = max(self.predict_max_inflight, self.predict_inflight)

    def _done(self, req: Any) -> None:
        if urlsplit(req.url).path == "/predict":
            self.predict_inflight -= 1

    def _failed(self, req: Any) -> None:
        self._done(req)
        self.errors.append(f"request failed: {req.url} {req.failure}")

    def foreign(self) -> list[str]:
        return [u for u in self.urls if urlsplit(u).scheme not in ("data", "blob") and urlsplit(u).hostname != "127.0.0.1"]

    def check(self) -> None:
        assert not self.foreign(), f"requests left 127.0.0.1: {self.foreign()}"
        assert not self.errors, f"errors in the page: {self.errors}"


def open_page(browser: Any, base_url: str, **context_args: Any) -> tuple[Any, Any, Watch]:
    context = browser.new_context(**{"viewport": {"width": 1280, "height": 900}, **context_args})
    context.set_default_timeout(WAIT_MS)
    page = context.new_page()
    watch = Watch(page)
    page.goto(base_url + "/")
    page.wait_for_selector("#app.is-ready")
    return context, page, watch
