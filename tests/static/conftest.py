"""The page's harness: Debian's Chromium through playwright, and the real service on a free loopback port.

The browser is system Chromium (`apt-get install chromium`); without it these tests skip, unless
CAPSNET_REQUIRE_BROWSER=1 (CI) makes that a failure.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.page import CHROMIUM, LAUNCH_ARGS
from harness.server import Server
from tests.needs import missing
from tests.static.pages import Watch, open_page

READY_TIMEOUT_S = 60.0


def _require_browser(reason: str) -> None:
    missing("browser", reason)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _require_browser("playwright is not installed: pip install -r requirements/test.txt to run the page tests")
    if not Path(CHROMIUM).exists():
        _require_browser("Chromium not found: apt-get install chromium (Debian) to run the page tests")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def base_url(browser: Any, request: pytest.FixtureRequest) -> Iterator[str]:
    """The real service (`python -m service`) on a free loopback port; needs the browser first, so a
    run without Chromium skips before starting it. Its weights are `pair_weights` (tests/conftest.py): weights/, with the
    two-digit network of section 7 beside it while the committed card has none."""
    server = Server({"CAPSNET_LOG_LEVEL": "warning"}, weights=request.getfixturevalue("pair_weights"))
    try:
        server.wait_ready(READY_TIMEOUT_S)
    except (RuntimeError, TimeoutError) as e:
        pytest.fail(f"the service did not start: {e}\n{server.output()[-4000:]}")
    yield server.url
    server.stop()


@pytest.fixture
def session(browser: Any, base_url: str) -> Iterator[tuple[Any, Watch]]:
    """A fresh desktop page; on teardown, no request left 127.0.0.1 and nothing went wrong in it."""
    context, page, watch = open_page(browser, base_url)
    yield page, watch
    context.close()
    watch.check()


@pytest.fixture
def page(session: tuple[Any, Watch]) -> Any:
    return session[0]
