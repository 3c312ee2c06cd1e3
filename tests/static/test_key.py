"""The page where the server wants an API key (static/key.js): it asks for one at the top, says why nothing is
answered without it, and once the key is typed every request it makes carries it."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from harness.server import Server
from tests.static.pages import open_page
from tests.static.test_page import ZERO, draw, expect, wait_predicted

KEY = "a-key-for-the-page"


def test_the_page_asks_for_the_key_and_uses_it(browser: Any, tmp_path) -> None:
    keys = tmp_path / "keys"
    keys.write_text(KEY + "\n")
    server = Server({"CAPSNET_API_KEYS_FILE": str(keys), "CAPSNET_LOG_LEVEL": "warning"}).wait_ready(120)
    try:
        context, page, _ = open_page(browser, server.url)
        sent: list[str | None] = []
        page.on(
            "request",
            lambda r: urlsplit(r.url).path == "/predict" and sent.append(r.headers.get("authorization")),
        )
        expect(page.get_by_test_id("key-form")).to_be_visible()
        expect(page.get_by_test_id("key-state")).to_contain_text("No key yet")
        draw(page, ZERO)
        expect(page.locator("#status")).to_contain_text("this server wants an API key")
        page.get_by_test_id("api-key").fill(KEY)
        page.get_by_test_id("api-key-use").click()
        expect(page.get_by_test_id("key-state")).to_contain_text("A key is set")
        page.get_by_test_id("clear").click()
        draw(page, ZERO)
        wait_predicted(page, 0)
        assert sent[0] is None and sent[-1] == f"Bearer {KEY}"
        context.close()
    finally:
        server.stop()
