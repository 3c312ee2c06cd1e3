"""A page of the real service in Chromium, watched: every request it makes, its console errors, page errors and CSP
violations, so that each test can end by asserting that nothing left loopback and nothing went wrong."""

from __future__ import annotations

import time
import weakref
from typing import Any
from urllib.parse import urlsplit

WAIT_MS = 30_000  # one condition on the page (a /predict may take a second on a busy CPU)
QUIET_MS = 500  # as Playwright's "networkidle": no request for this long (the Figure 4 grid waits 150 ms to start)
_WATCHES: weakref.WeakKeyDictionary[Any, Watch] = weakref.WeakKeyDictionary()


class Watch:
    """Every request a page makes, its console errors, page errors and CSP violations."""

    def __init__(self, page: Any) -> None:
        self.urls: list[str] = []
        self.errors: list[str] = []
        self.predict_inflight = 0
        self.predict_max_inflight = 0
        self.predict_count = 0
        self.inflight = 0  # every request of the page's, for network_quiet
        self.last_activity = time.monotonic()
        _WATCHES[page] = self
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
        self.inflight += 1
        self.last_activity = time.monotonic()
        if urlsplit(req.url).path == "/predict":
            self.predict_count += 1
            self.predict_inflight += 1
            self.predict_max_inflight = max(self.predict_max_inflight, self.predict_inflight)

    def _done(self, req: Any) -> None:
        self.inflight -= 1
        self.last_activity = time.monotonic()
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


def network_quiet(page: Any) -> None:
    """No request of the page's in flight, and none for QUIET_MS: what Playwright's "networkidle" says, but each time it
    is asked (that state fires once a page, after its load, and is answered at once from then on, so a wait on it after
    a stroke waits for nothing)."""
    watch = _WATCHES[page]
    deadline = time.monotonic() + WAIT_MS / 1000
    while watch.inflight or time.monotonic() - watch.last_activity < QUIET_MS / 1000:
        assert time.monotonic() < deadline, f"{watch.inflight} requests still in flight after {WAIT_MS} ms"
        page.wait_for_timeout(50)  # the browser's events reach the watch meanwhile
