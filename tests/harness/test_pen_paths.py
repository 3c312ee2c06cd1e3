"""harness/pen_paths.py: strokes traced from a digit redraw that digit."""

from __future__ import annotations

import numpy as np

from harness.pen_paths import pair_items, place, render, thin, trace


def test_thinning_leaves_a_one_pixel_line_of_a_thick_bar() -> None:
    bar = np.zeros((20, 20), bool)
    bar[3:17, 8:13] = True
    line = thin(bar)
    assert line.any() and line.sum(1).max() == 1 and line[:, :8].sum() == 0 and line[:, 13:].sum() == 0


def test_a_traced_ring_is_drawn_back_where_the_ring_was() -> None:
    yy, xx = np.mgrid[:28, :28]
    ring = (np.abs(np.hypot(yy - 14, xx - 14) - 7) < 1.5).astype(np.float32)
    strokes = trace(ring)
    drawn = render(place(strokes, 1.0, 0.0, 0.0), 28, 3 / 28)
    assert len(strokes) >= 1
    overlap = (drawn > 0.5) & (ring > 0.5)
    assert overlap.sum() >= 0.7 * (ring > 0.5).sum() and (drawn[12:17, 12:17] > 0.5).sum() == 0  # the hole stays open


def test_pairs_are_two_digits_of_different_classes_after_as_many_lone_ones() -> None:
    y = np.arange(100) % 10
    items = pair_items(np.zeros((100, 28, 28)), y, 5, seed=1)
    assert [len(i["digits"]) for i in items] == [1] * 5 + [2] * 5
    assert all(i["labels"][0] != i["labels"][1] for i in items[5:]) and all(np.abs(i["shifts"]).max() <= 4 for i in items)
