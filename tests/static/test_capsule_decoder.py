"""The capsule decoder in the page (static/capsule_decoder.js), in real Chromium against the real service.

The browser's pictures must be the server's (at most one grey level apart on any pixel) for both networks' decoders, from
the committed file checked against the card; a drag must redraw every move with no request in the loop, even at a 200 ms
round trip; the weights come at the first touch of a slider, not with the page; and a browser that cannot run the
decoder (here: a file that is not the card's) says so in one line and draws on the server.
"""

from __future__ import annotations

import base64
import io
import json
import urllib.request
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import pytest

from tests.conftest import WEIGHTS
from tests.static.pages import Watch, network_quiet, open_page
from tests.static.test_page import ZERO, draw, expect, src, wait_settled, wait_src_change

DELTAS = [-0.25, -0.2, -0.15, -0.1, -0.05, 0.0, 0.05, 0.1, 0.15, 0.2, 0.25]  # the server's /perturb default


def png_grey(data_url_or_b64: str) -> np.ndarray:
    from PIL import Image

    b64 = data_url_or_b64.split(",", 1)[1] if data_url_or_b64.startswith("data:") else data_url_or_b64
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(b64))).convert("L"), dtype=np.int16)


def post(base_url: str, path: str, body: dict) -> dict:
    req = urllib.request.Request(base_url + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def browser_decode(page: Any, spec_of: str, jobs: list[tuple[int, list[float]]]) -> dict:
    """The page's decoder module on the page's own spec: each (digit, pose) as greys, and whether the file was checked."""
    return page.evaluate(
        """async ([specOf, jobs]) => {
            const m = await import('/static/capsule_decoder.js');
            const spec = JSON.parse(document.querySelector(specOf).dataset.decoder);
            const d = new m.CapsuleDecoder(spec, 10, 16);
            await d.load();
            return { verified: d.verified, side: spec.side,
                     images: jobs.map(([digit, pose]) => Array.from(d.decode(digit, pose), m.grey)) };
        }""",
        [spec_of, jobs],
    )


@pytest.mark.parametrize("model, spec_of", [("capsnet", "#app"), ("multimnist", "#pairs")])
def test_the_browsers_pictures_are_the_servers(session: tuple[Any, Watch], base_url: str, model: str, spec_of: str) -> None:
    page, _ = session
    rng = np.random.default_rng(7)
    jobs = []
    for digit in (0, 3, 7, 9):
        pose = rng.normal(0.0, 0.15, 16)
        for delta in (-0.25, 0.0, 0.25):
            shifted = pose.copy()
            shifted[digit % 16] += delta
            jobs.append((digit, [round(float(v), 6) for v in shifted]))
    got = browser_decode(page, spec_of, jobs)
    assert got["verified"], "the browser did not check the file against the card's sha256"
    for (digit, pose), grey in zip(jobs, got["images"]):
        server = post(base_url, f"/reconstruct?model={model}", {"digit": digit, "pose": pose})["reconstruction"]["png"]
        want = png_grey(server)
        mine = np.array(grey, dtype=np.int16).reshape(want.shape)
        assert np.abs(mine - want).max() <= 1, f"digit {digit}: {np.abs(mine - want).max()} grey levels apart"


def test_sliders_and_figure_4_draw_in_the_browser_as_the_server_would(session: tuple[Any, Watch], base_url: str) -> None:
    page, watch = session
    answers: list[Any] = []
    page.on("response", lambda r: urlsplit(r.url).path == "/predict" and answers.append(r))
    draw(page, ZERO)
    wait_settled(page)
    assert not [u for u in watch.urls if "/decoders/" in u], "the decoder's weights were fetched before a slider was touched"
    where = page.get_by_test_id("decoder-where")
    expect(where).to_contain_text("once its decoder")
    served = src(page, "perturb-grid")  # the server's grid, until the weights are here
    assert served
    mark = len(watch.urls)
    page.get_by_test_id("pose-slider-2").focus()
    page.keyboard.press("ArrowRight")
    expect(where).to_contain_text("Sliders redraw in this browser", timeout=30_000)
    expect(where).to_contain_text("checked against the model card")
    assert len([u for u in watch.urls if "/decoders/" in u]) == 1
    # Figure 4 is drawn again here once the weights are in: the same grid the server draws for the pose /predict gave
    shown = png_grey(wait_src_change(page, "perturb-grid", served))
    network_quiet(page)
    assert "/perturb" not in [urlsplit(u).path for u in watch.urls[mark:]]
    last = answers[-1].json()
    digit = last["prediction"]
    want = png_grey(post(base_url, "/perturb", {"digit": digit, "pose": last["poses"][digit]})["grid"]["png"])
    assert shown.shape == want.shape == (16 * 28, len(DELTAS) * 28)
    assert np.abs(shown - want).max() <= 1


def test_a_drag_at_a_200_ms_round_trip_redraws_every_move_without_the_network(session: tuple[Any, Watch]) -> None:
    """Chromium's network emulation adds 200 ms to every request; once the weights are in, each move of a slider shows its
    own picture before the next, and no request is made during the drag (the figures a second are `make bench`'s)."""
    page, watch = session
    draw(page, ZERO)
    wait_settled(page)
    cdp = page.context.new_cdp_session(page)
    cdp.send("Network.enable")
    cdp.send("Network.emulateNetworkConditions", {"offline": False, "latency": 200, "downloadThroughput": -1, "uploadThroughput": -1})
    slider = page.get_by_test_id("pose-slider-0")
    slider.focus()
    page.keyboard.press("ArrowLeft")
    expect(page.get_by_test_id("decoder-where")).to_contain_text("Sliders redraw in this browser", timeout=30_000)
    network_quiet(page)
    before = len(watch.urls)
    seen = [src(page, "reconstruction")]
    for _ in range(30):
        page.keyboard.press("ArrowRight")
        seen.append(src(page, "reconstruction"))  # read at once: the picture came with the move, not after a round trip
    assert len(set(seen)) == len(seen), "a move did not show its own picture before the next"
    during = [urlsplit(u).path for u in watch.urls[before:]]
    assert not [p for p in during if p in ("/reconstruct", "/perturb")], f"requests during the drag: {during}"
    expect(page.get_by_test_id("pose-out-0")).to_have_text("+0.29")


def test_a_file_that_is_not_the_cards_is_refused_and_the_server_draws(browser: Any, base_url: str) -> None:
    context, page, watch = open_page(browser, base_url)
    try:
        tampered = bytearray((WEIGHTS / "decoder.onnx").read_bytes())
        tampered[-100] ^= 0xFF
        page.route("**/decoders/*", lambda route: route.fulfill(status=200, body=bytes(tampered), content_type="application/octet-stream"))
        draw(page, ZERO)
        wait_settled(page)
        original = src(page, "reconstruction")
        slider = page.get_by_test_id("pose-slider-3")
        slider.focus()
        with page.expect_response(lambda r: urlsplit(r.url).path == "/reconstruct"):
            page.keyboard.press("ArrowRight")
        expect(page.get_by_test_id("decoder-where")).to_have_text(
            "Sliders redraw on the server: the decoder file is not the one the model card names (sha256)."
        )
        moved = wait_src_change(page, "reconstruction", original)
        with page.expect_response(lambda r: urlsplit(r.url).path == "/reconstruct"):
            page.keyboard.press("ArrowRight")
        wait_src_change(page, "reconstruction", moved)
        network_quiet(page)
    finally:
        context.close()
    watch.check()


def test_a_decoder_not_reached_is_tried_again_at_a_later_touch(browser: Any, base_url: str) -> None:
    """The decoder's file not reached (the network down a moment): the line says so in plain words and that the server
    draws meanwhile, and a later touch of a slider tries again, so the browser draws once the file comes (one failure
    switched the browser's decoder off for the rest of the visit, in words that said the server draws)."""
    context, page, watch = open_page(browser, base_url)
    try:
        page.route("**/decoders/*", lambda route: route.abort("internetdisconnected"))
        draw(page, ZERO)
        wait_settled(page)
        slider = page.get_by_test_id("pose-slider-3")
        slider.focus()
        with page.expect_response(lambda r: urlsplit(r.url).path == "/reconstruct"):
            page.keyboard.press("ArrowRight")
        where = page.get_by_test_id("decoder-where")
        expect(where).to_contain_text("The decoder could not be loaded (the server could not be reached")
        expect(where).to_contain_text("a later touch tries again")
        page.unroute("**/decoders/*")
        page.wait_for_timeout(3100)  # a touch within 3 s of a failure does not ask again (capsule_decoder.js RETRY_MS)
        page.keyboard.press("ArrowRight")
        expect(where).to_contain_text("Sliders redraw in this browser", timeout=30_000)
        network_quiet(page)
    finally:
        context.close()
    assert not watch.foreign()
    assert all("/decoders/" in e or "ERR_INTERNET_DISCONNECTED" in e for e in watch.errors), watch.errors  # the blocked file's alone
