"""What a person sees when something fails, in real Chromium against the real service: a file that is not an image,
a redrawing or a Figure 4 grid the server could not make, and a gateway in front answering with a page that is not
JSON. Each says what went wrong in the status line, in words, and the page goes on working."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from tests.static.pages import Watch, network_quiet, open_page
from tests.static.test_page import ZERO, draw, expect, src, wait_predicted, wait_settled


def _status(page: Any) -> Any:
    return page.locator("#status")


def _drop_logged(page: Any, watch: Watch, failed: list[Any], *marks: str) -> None:
    """The browser logs each failed request itself, a moment after the page has shown it: once the network is idle, wait
    until a line has come for every failed response (`failed`; a bound of 10 s), then drop those lines, so that the
    teardown's check sees only the unexpected."""
    network_quiet(page)

    def logged() -> int:
        return sum(any(mark in e for mark in marks) for e in watch.errors)

    for _ in range(100):
        if logged() >= len(failed):
            break
        page.wait_for_timeout(100)
    watch.errors = [e for e in watch.errors if not any(mark in e for mark in marks)]


def test_a_file_that_is_not_an_image_is_named_and_nothing_is_sent(session: tuple[Any, Watch]) -> None:
    page, watch = session
    before = len(watch.urls)
    page.get_by_test_id("upload").set_input_files(files=[{"name": "notes.txt", "mimeType": "text/plain", "buffer": b"hello"}])
    expect(_status(page)).to_have_text("That file is not an image (text/plain).")
    expect(_status(page)).to_have_class(re.compile(r"\bis-error\b"))
    assert not [u for u in watch.urls[before:] if urlsplit(u).path == "/predict"]


def test_a_failed_redrawing_and_grid_say_so_and_the_next_works(session: tuple[Any, Watch]) -> None:
    """The server draws the sliders until the page's decoder is in; here it fails once (a 500 with an id, as the
    service answers a model that raised) and the decoder's file cannot be had, so the server draws everything."""
    page, watch = session
    failures = {"/reconstruct": 1, "/perturb": 1}
    failed: list[Any] = []
    page.on("response", lambda r: r.status == 500 and failed.append(r))
    page.on("requestfailed", lambda r: failed.append(r))  # the decoder file, refused

    def fail_once(route: Any) -> None:
        path = urlsplit(route.request.url).path
        if failures.get(path):
            failures[path] -= 1
            body = '{"error": "inference_failed", "detail": "the model failed on this request; quote id 0123456789ab"}'
            route.fulfill(status=500, content_type="application/json", body=body)
        else:
            route.continue_()

    page.route("**/decoders/*", lambda route: route.abort())
    page.route(re.compile(r".*/(reconstruct|perturb)$"), fail_once)
    draw(page, ZERO)
    wait_predicted(page, 0)
    expect(_status(page)).to_contain_text("Could not draw the Figure 4 grid: the model failed on this request; quote id")
    page.get_by_test_id("pose-slider-0").focus()
    page.keyboard.press("ArrowRight")
    expect(_status(page)).to_contain_text("Could not reconstruct: the model failed on this request; quote id")
    before = src(page, "reconstruction")
    page.keyboard.press("ArrowRight")
    page.wait_for_function("(old) => document.querySelector('[data-testid=\"reconstruction\"]').getAttribute('src') !== old", arg=before)
    # the browser logs the failed requests itself (the 500s; the refused decoder file); nothing else went wrong
    _drop_logged(page, watch, failed, "status of 500", "ERR_FAILED")


def test_a_gateway_page_that_is_not_json_is_answered_in_words(session: tuple[Any, Watch]) -> None:
    page, watch = session
    failed: list[Any] = []
    page.on("response", lambda r: r.status == 502 and failed.append(r))
    page.route(
        lambda url: urlsplit(url).path == "/predict",
        lambda route: route.fulfill(status=502, content_type="text/html", body="<html><body>Bad Gateway</body></html>"),
    )
    draw(page, ZERO)
    expect(_status(page)).to_contain_text("Could not classify: HTTP 502")
    expect(page.get_by_test_id("prediction")).to_have_text("")
    _drop_logged(page, watch, failed, "status of 502")


def test_the_page_recovers_once_the_server_answers_again(session: tuple[Any, Watch]) -> None:
    """A gateway's 502 first, shown as an error; the next drawing, once /predict answers again, is read and the error
    is gone."""
    page, watch = session
    failed: list[Any] = []
    page.on("response", lambda r: r.status == 502 and failed.append(r))

    def gateway(route: Any) -> None:
        route.fulfill(status=502, content_type="text/html", body="<html><body>Bad Gateway</body></html>")

    def predict(url: str) -> bool:
        return urlsplit(url).path == "/predict"

    page.route(predict, gateway)
    draw(page, ZERO)
    expect(_status(page)).to_have_class(re.compile(r"\bis-error\b"))
    _drop_logged(page, watch, failed, "status of 502")
    page.unroute(predict, gateway)
    draw(page, ZERO)
    wait_predicted(page, 0)
    wait_settled(page)
    expect(_status(page)).not_to_have_class(re.compile(r"\bis-error\b"))


def test_a_server_without_the_routing_trace_still_reads_drawings(browser: Any, tmp_path: Any) -> None:
    """A front whose weights hold the card but not the routing trace (a remote engine's may): the page reads a drawing
    as any other, and says in the routing section why there is no routing to show."""
    import json

    from harness.server import Server
    from tests.service.test_loading import weights_dir

    weights = weights_dir(tmp_path)
    card = json.loads((weights / "model-card.json").read_text())
    del card["routing"]
    (weights / "model-card.json").write_text(json.dumps(card))
    server = Server({"CAPSNET_LOG_LEVEL": "warning"}, weights=weights).wait_ready()
    context, page, watch = open_page(browser, server.url)
    try:
        draw(page, ZERO)
        wait_predicted(page, 0)
        wait_settled(page)
        expect(_status(page)).not_to_have_class(re.compile(r"\bis-error\b"))
        expect(page.locator("#routing-legend-text")).to_contain_text("This server has no routing trace")
    finally:
        context.close()
        server.stop()
    watch.check()
