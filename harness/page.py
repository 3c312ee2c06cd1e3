"""Driving the page as a person does, for its tests and for the README's screenshots (harness/screenshots.py): strokes
drawn with the mouse on one of its canvases."""

from __future__ import annotations

import os
from typing import Any

CHROMIUM = os.environ.get("CAPSNET_CHROMIUM", "/usr/bin/chromium")  # Debian's; playwright drives it, no browser download
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]

Strokes = list[list[tuple[float, float]]]


def canvas_box(page: Any, canvas: str = "draw-canvas") -> dict[str, float]:
    return page.get_by_test_id(canvas).bounding_box()


def draw(page: Any, strokes: Strokes, steps: int = 4, canvas: str = "draw-canvas") -> None:
    """Mouse strokes along polylines given in fractions of the canvas."""
    box = canvas_box(page, canvas)

    def at(p: tuple[float, float]) -> tuple[float, float]:
        return box["x"] + p[0] * box["width"], box["y"] + p[1] * box["height"]

    for stroke in strokes:
        page.mouse.move(*at(stroke[0]))
        page.mouse.down()
        for p in stroke[1:]:
            page.mouse.move(*at(p), steps=steps)
        page.mouse.up()
