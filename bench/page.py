"""The page's pose sliders, in Chromium: how many pictures a second a drag shows and how soon the last one follows the
last move, at loopback and at emulated round trips of 100 and 200 ms; the decoder in the browser (static/capsule_decoder.js)
against the server drawing each move (/reconstruct, what the page falls back to); the first touch's wait for the
weights, and the bytes a visitor downloads."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

from harness.page import CHROMIUM, LAUNCH_ARGS
from harness.server import Server

log = logging.getLogger("bench.page")

ZERO = [(0.5 + 0.22 * math.sin(2 * math.pi * k / 48), 0.5 - 0.33 * math.cos(2 * math.pi * k / 48)) for k in range(49)]  # a drawn 0
POSITIONS, HZ = 30, 60  # a drag across 30 positions of a slider at a display's 60 Hz
RTTS_MS = (0, 100, 200)

# the drag, in the page: each move sets the slider and fires `input` as a hand would, one a frame; every change of the
# picture is stamped; the answer comes when no picture has changed for `quiet` ms after the last move
DRAG = """async ([positions, hz, quiet]) => {
    const slider = document.getElementById('pose-slider-0'), img = document.getElementById('reconstruction');
    const shown = [];
    const watch = new MutationObserver(() => shown.push(performance.now()));
    watch.observe(img, { attributes: true, attributeFilter: ['src'] });
    const start = performance.now();
    for (let k = 1; k <= positions; k++) {
        slider.value = (0.01 * k).toFixed(2);
        slider.dispatchEvent(new Event('input', { bubbles: true }));
        await new Promise((r) => setTimeout(r, 1000 / hz));
    }
    const lastMove = performance.now() - 1000 / hz;
    while (performance.now() - Math.max(lastMove, shown.length ? shown[shown.length - 1] : 0) < quiet) {
        await new Promise((r) => setTimeout(r, 10));
    }
    watch.disconnect();
    const during = shown.filter((t) => t <= lastMove + 1000 / hz);
    return { pictures: shown.length, during_drag: during.length, drag_ms: lastMove - start,
             last_picture_after_last_move_ms: shown.length ? Math.max(0, shown[shown.length - 1] - lastMove) : null };
}"""

# the first touch: a key press on a slider, to the moment the line says the browser draws (the picture is drawn just before)
FIRST_TOUCH = """async () => {
    const where = document.getElementById('decoder-where'), slider = document.getElementById('pose-slider-1');
    const done = new Promise((resolve) => new MutationObserver(() => {
        if (where.textContent.startsWith('Sliders redraw in this browser')) resolve(performance.now());
    }).observe(where, { childList: true, characterData: true, subtree: true }));
    const t0 = performance.now();
    slider.dispatchEvent(new KeyboardEvent('keydown', { key: 'ArrowRight', bubbles: true }));
    return (await done) - t0;
}"""


def _draw(page: Any) -> None:
    box = page.get_by_test_id("draw-canvas").bounding_box()
    pts = [(box["x"] + x * box["width"], box["y"] + y * box["height"]) for x, y in ZERO]
    page.mouse.move(*pts[0])
    page.mouse.down()
    for p in pts[1:]:
        page.mouse.move(*p, steps=2)
    page.mouse.up()
    page.wait_for_function("() => /^\\d$/.test(document.querySelector('[data-testid=\"prediction\"]').textContent)")
    page.wait_for_load_state("networkidle")


def _drag(browser: Any, url: str, where: str, rtt_ms: int) -> dict:
    """One drag on a fresh page: `where` the decoder runs ("browser", or "server" with the weights refused)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    if where == "server":
        page.route("**/decoders/*", lambda route: route.abort())
    page.goto(url + "/")
    page.wait_for_selector("#app.is-ready")
    _draw(page)
    cdp = context.new_cdp_session(page)
    cdp.send("Network.enable")
    cdp.send("Network.emulateNetworkConditions", {"offline": False, "latency": rtt_ms, "downloadThroughput": -1, "uploadThroughput": -1})
    page.get_by_test_id("pose-slider-0").focus()
    page.keyboard.press("ArrowLeft")  # the first touch: the weights are fetched (or refused) before the drag is timed
    page.wait_for_function("() => !document.getElementById('decoder-where').textContent.startsWith('Loading')")
    page.wait_for_load_state("networkidle")
    got = page.evaluate(DRAG, [POSITIONS, HZ, max(400, 3 * rtt_ms)])
    context.close()
    seconds = got["drag_ms"] / 1000.0
    last = got["last_picture_after_last_move_ms"]
    return {
        "where": where,
        "rtt_ms": rtt_ms,
        "moves_per_s": round(POSITIONS / seconds, 1),
        "pictures_per_s_during_drag": round(got["during_drag"] / seconds, 1),
        "last_picture_after_last_move_ms": None if last is None else round(last),
        "pictures": got["pictures"],
    }


def _first_touch(browser: Any, url: str) -> dict:
    """A fresh context (nothing cached): the first touch to the first picture drawn here, and what the page weighs."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(url + "/")
    page.wait_for_selector("#app.is-ready")
    first_load = page.evaluate(
        "() => performance.getEntriesByType('navigation')[0].transferSize"
        " + performance.getEntriesByType('resource').reduce((s, e) => s + e.transferSize, 0)"
    )
    _draw(page)
    ms = page.evaluate(FIRST_TOUCH)
    spec = json.loads(page.evaluate("() => document.getElementById('app').dataset.decoder"))
    per = page.evaluate(
        """async () => { const m = await import('/static/capsule_decoder.js');
            const d = new m.CapsuleDecoder(JSON.parse(document.getElementById('app').dataset.decoder), 10, 16);
            await d.load();
            const pose = Array.from({ length: 16 }, (_, i) => 0.1 * Math.sin(i));
            for (let k = 0; k < 20; k++) d.decode(3, pose);
            const t0 = performance.now();
            for (let k = 0; k < 200; k++) d.decode(3, pose);
            return (performance.now() - t0) / 200; }"""
    )
    context.close()
    return {
        "first_touch_to_picture_here_ms": round(ms),
        "page_first_load_bytes": first_load,
        "decoder_file_bytes": spec["bytes"],
        "ms_a_picture_in_the_browser": round(per, 2),
    }


def measure(weights: Path) -> dict:
    if not Path(CHROMIUM).exists():
        return {"skipped": f"no Chromium at {CHROMIUM} (apt-get install chromium)"}
    from playwright.sync_api import sync_playwright

    server = Server({"CAPSNET_LOG_LEVEL": "warning"}, weights=weights).wait_ready(120)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
            first = _first_touch(browser, server.url)
            drags = [_drag(browser, server.url, where, rtt) for rtt in RTTS_MS for where in ("browser", "server")]
            browser.close()
    finally:
        server.stop()
    return {"positions": POSITIONS, "hz": HZ, **first, "drags": drags}
