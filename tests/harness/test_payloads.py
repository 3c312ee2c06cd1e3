"""The payloads the benchmarks send are what clients send."""

from __future__ import annotations

import base64
import struct
import zlib
from pathlib import Path


def test_the_benchs_canvas_drawings_are_encoded_as_the_browser_exports_a_canvas():
    """How a PNG was compressed sets most of its decode, so the canvas drawings the bench sends are encoded as Chromium's
    canvas.toDataURL encodes the page's: every row filtered Up, zlib at its fastest level."""
    from bench.front import _canvas_png
    from bench.realinput import canvas_png
    from harness.page import CHROMIUM, LAUNCH_ARGS
    from harness.payloads import digit_pngs
    from tests.needs import missing

    if not Path(CHROMIUM).exists():
        missing("browser", "Chromium not found: apt-get install chromium (Debian) to compare with its canvas export")
    from playwright.sync_api import sync_playwright

    draw = """() => { const c = document.createElement('canvas'); c.width = c.height = 280; const x = c.getContext('2d');
        x.lineCap = 'round'; x.lineWidth = 280 / 12; x.beginPath(); x.moveTo(70, 50); x.lineTo(210, 60); x.lineTo(120, 240);
        x.stroke(); return c.toDataURL('image/png'); }"""
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        try:
            exported = base64.b64decode(browser.new_page().evaluate(draw).split(",", 1)[1])
        finally:
            browser.close()
    assert _encoding(exported) == ({2}, 0)
    for ours in (_canvas_png(digit_pngs(1)[0]), canvas_png()):
        assert _encoding(ours) == _encoding(exported)


def _encoding(png: bytes) -> tuple[set[int], int]:
    """A PNG's row filters (the first byte of each row) and its zlib stream's compression level (FLEVEL)."""
    at, idat, width, height = 8, b"", 0, 0
    while at < len(png):
        (n,) = struct.unpack(">I", png[at : at + 4])
        kind, body = png[at + 4 : at + 8], png[at + 8 : at + 8 + n]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        at += 12 + n
    rows = zlib.decompress(idat)
    stride = 1 + 4 * width
    return {rows[k * stride] for k in range(height)}, idat[1] >> 6
