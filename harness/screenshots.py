"""The README's screenshots, taken of the real page in Chromium against the real service: `make screenshots`.

- docs/screenshot.png: the whole page after a person has drawn an MNIST test digit on it (its strokes traced by
  model/pen_strokes.py and drawn with the mouse);
- docs/pairs.png: section 7 after two test digits were drawn over each other, the first in red and the second in
  green: the first such pair of a seeded list that the network names both digits of;
- docs/pairs-apart.png: section 7 after two test digits were written side by side, each on its own half of the canvas
  (docs/multimnist.md): the first such pair of the same list named right.

Each PNG carries the versions of the networks it shows (text chunks `capsnet` and `multimnist`), so that a test can
tell a screenshot of weights that are no longer committed (tests/harness/test_screenshots.py).
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import Any

from PIL import Image
from PIL.PngImagePlugin import PngInfo

from harness.page import CHROMIUM, LAUNCH_ARGS, draw
from harness.pen_paths import apart_strokes, pair_items
from harness.server import REPO, Server
from model import MNIST_DIR
from model.idx import load_mnist
from model.pen_strokes import place, trace

log = logging.getLogger("harness.screenshots")

WAIT_MS = 60_000
DIGIT = 1  # MNIST's second test digit, a 2: the page's first section drawn with it
PAIR_SEED, PAIR_TRIES = 2017, 12
CANVAS = 36  # the two-digit network's canvas, in px of its input


def versions(weights: Path) -> dict[str, str]:
    """The versions of the networks the committed card names, as the screenshots record them."""
    card = json.loads((weights / "model-card.json").read_text())
    return {"capsnet": card["version"], **({"multimnist": card["multimnist"]["version"]} if "multimnist" in card else {})}


def stamped(path: Path, networks: dict[str, str]) -> None:
    """Rewrite a PNG with the networks' versions as text chunks (optimised: the README's images stay small)."""
    info = PngInfo()
    for name, version in networks.items():
        info.add_text(name, version)
    with Image.open(path) as im:
        im.load()
        im.save(path, pnginfo=info, optimize=True)


def _settled(page: Any, verdict: str) -> None:
    """The answer on show is the newest request's (the verdict's aria-busy, static/channel.js) and nothing is in flight."""
    page.wait_for_function(f"() => document.querySelector('[data-testid=\"{verdict}\"]').getAttribute('aria-busy') === 'false'")
    page.wait_for_load_state("networkidle")


def whole_page(page: Any, digit: Any, out: Path) -> None:
    draw(page, trace(digit / 255.0))  # strokes in fractions of the 28x28 frame: the digit fills the canvas as MNIST fills its frame
    page.wait_for_function("() => /^\\d$/.test(document.querySelector('[data-testid=\"prediction\"]').textContent.trim())")
    _settled(page, "verdict")
    page.mouse.move(0, 0)  # no hover left on a control
    page.screenshot(path=str(out), full_page=True)


def section_7(page: Any, x: Any, y: Any, out: Path, apart: bool = False) -> list[int]:
    """Draw test pairs until one is named right, over each other or (`apart`) side by side; its section shot. Returns the
    pair's labels."""
    items = pair_items(x, y, PAIR_TRIES, PAIR_SEED)[PAIR_TRIES:]
    page.get_by_test_id("pair-canvas").scroll_into_view_if_needed()
    for item in items:
        page.get_by_test_id("pair-clear").click()
        page.get_by_test_id("pair-ink-1").click()
        if apart:  # their frames 4 px apart at MNIST's scale
            strokes = apart_strokes([x[d] for d in item["digits"]], item["shifts"], 4)
        else:
            strokes = [
                place(trace(x[d] / 255.0), 28 / CANVAS, dx / CANVAS, dy / CANVAS) for d, (dy, dx) in zip(item["digits"], item["shifts"])
            ]
        for k, digit in enumerate(strokes):
            if k:
                page.get_by_test_id("pair-ink-2").click()
            draw(page, digit, steps=1, canvas="pair-canvas")
        # answered (ranked is set by any answer, "no digits" included; a clear empties it), then settled
        page.wait_for_function("() => !!document.querySelector('[data-testid=\"pair-verdict\"]').dataset.ranked")
        _settled(page, "pair-verdict")
        named = page.get_by_test_id("pair-verdict").get_attribute("data-predictions") or ""
        if sorted(int(d) for d in named.split(",") if d) == sorted(item["labels"]):
            page.mouse.move(0, 0)
            page.locator("#pairs").screenshot(path=str(out))
            return item["labels"]
        log.info("pair %s named %s: the next one", item["labels"], named)
    raise SystemExit(f"none of {PAIR_TRIES} test pairs was named right on the page")


def take(out: Path, data: Path, weights: Path = REPO / "weights") -> dict[str, Path]:
    from playwright.sync_api import sync_playwright

    x, y = load_mnist(data, "test")
    networks = versions(weights)
    shots = {"page": out / "screenshot.png", "pairs": out / "pairs.png", "pairs_apart": out / "pairs-apart.png"}
    server = Server({"CAPSNET_LOG_LEVEL": "warning", "CAPSNET_MNIST_DIR": str(data.resolve())}, weights=weights).wait_ready(120)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            context.set_default_timeout(WAIT_MS)
            page = context.new_page()
            page.goto(server.url + "/")
            whole_page(page, x[DIGIT], shots["page"])
            if "multimnist" in networks:
                labels = section_7(page, x, y, shots["pairs"])
                log.info("section 7: the test pair %s drawn and named", labels)
                labels = section_7(page, x, y, shots["pairs_apart"], apart=True)
                log.info("section 7: the test pair %s written apart and named", labels)
            else:
                del shots["pairs"], shots["pairs_apart"]
            browser.close()
    finally:
        server.stop()
    for shot in shots.values():
        stamped(shot, networks)
    return shots


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=REPO / "docs", help="where screenshot.png, pairs.png and pairs-apart.png go")
    p.add_argument("--data", type=Path, default=Path(MNIST_DIR), help="MNIST's IDX files (the test digits drawn)")
    args = p.parse_args(argv)
    for name, path in take(args.out, args.data).items():
        log.info("%s: %s", name, path)


if __name__ == "__main__":
    main()
