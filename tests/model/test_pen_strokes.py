"""model/pen_strokes.py: strokes traced from a digit redraw that digit, as the page's pen draws it."""

from __future__ import annotations

import numpy as np

from model.pen_strokes import DRAWN_PEN, pen_digits, place, render, thin, trace


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


def test_a_nine_whose_loop_the_ink_filled_is_drawn_with_its_head() -> None:
    """A filled loop thins to a stub that a walk of the skeleton alone would drop: the 9 came back as a 7."""
    yy, xx = np.mgrid[:28, :28]
    head = np.hypot(yy - 10, xx - 13) < 5.0
    nine = (head | ((np.abs(xx - 17.5) < 1.2) & (yy > 10) & (yy < 24))).astype(np.float32)
    drawn = render(trace(nine), 28, DRAWN_PEN)
    assert ((drawn > 0.5) & head).sum() >= 0.8 * head.sum()
    assert drawn[yy > 16].sum() > 0 and drawn[:, :6].max() == 0  # the tail is there, and nothing is drawn off the digit


def test_digits_redrawn_with_the_pen_keep_their_place_and_are_kept_for_the_next_run(tmp_path, monkeypatch) -> None:
    from model import pen_strokes

    digits = np.zeros((3, 28, 28), np.uint8)
    digits[0, 5:23, 13:15] = 255  # a 1
    digits[1, 6:9, 8:20] = 255  # a bar
    cache = tmp_path / "pen.npz"
    drawn = pen_digits(digits, 2.5 / 28, cache)
    assert drawn.shape == (3, 28, 28) and drawn.dtype == np.float32 and drawn.max() <= 1.0
    assert drawn[0, 8:20, 12:16].mean() > 0.5 and drawn[0, :, :9].max() == 0 and drawn[2].max() == 0
    with monkeypatch.context() as m:
        m.setattr(pen_strokes, "trace", lambda *_: (_ for _ in ()).throw(AssertionError("redrawn, not read back")))
        assert np.array_equal(pen_digits(digits, 2.5 / 28, cache), drawn)
    with cache.open("wb") as f:  # as the tracer before kept them: no version beside them
        np.savez(f, digits=np.zeros_like(drawn), pen=np.float64(2.5 / 28))
    assert np.array_equal(pen_digits(digits, 2.5 / 28, cache), drawn)  # drawn again, not read back
    digits[0] = 0
    assert pen_digits(digits[:2], 2.5 / 28, cache)[0].max() == 0  # another set: redrawn
    assert pen_digits(digits[:2], 3.0 / 28, cache)[1].sum() > drawn[1].sum()  # another pen: redrawn, wider


def test_digits_drawn_by_several_processes_are_those_one_draws() -> None:
    rng = np.random.default_rng(0)
    digits = np.zeros((192, 28, 28), np.uint8)
    for d in digits:  # a bar and a stroke across it, each digit its own
        y, x = rng.integers(6, 16, 2)
        d[y : y + 8, x : x + 3] = 255
        d[y + 4 : y + 6, 5:23] = 200
    assert np.array_equal(pen_digits(digits, 2.5 / 28, workers=2), pen_digits(digits, 2.5 / 28, workers=1))
