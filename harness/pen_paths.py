"""The lone digits and pairs the two-digit paths are measured on (bench/pair_paths.py, the page's tests), drawn
MultiMNIST's way; the pen strokes they are drawn with: model/pen_strokes.py."""

from __future__ import annotations

import numpy as np

from model.pen_strokes import Stroke, place, trace

MAX_SHIFT = 4  # each digit of a pair shifted up to this many px each way on the 36 px canvas, as MultiMNIST makes them
APART_SCALE = 0.45  # two digits written apart on the page's canvas: each one's 28 px frame this share of the canvas wide


def pair_items(x: np.ndarray, y: np.ndarray, n: int, seed: int) -> list[dict]:
    """n lone digits then n pairs: indices, labels and each digit's shift on the canvas."""
    rng = np.random.default_rng(seed)
    items = []
    for k in range(2 * n):
        a = int(rng.integers(len(x)))
        digits = [a]
        if k >= n:
            b = int(rng.integers(len(x)))
            while y[b] == y[a]:
                b = int(rng.integers(len(x)))
            digits.append(b)
        shifts = rng.integers(-MAX_SHIFT, MAX_SHIFT + 1, (len(digits), 2))
        items.append({"digits": digits, "labels": [int(y[d]) for d in digits], "shifts": shifts})
    return items


def apart_strokes(digits: list[np.ndarray], shifts: np.ndarray, gap: int) -> list[list[Stroke]]:
    """Two digits (28x28, 0-255) written apart on the page's canvas, as people write two digits: each one's pen strokes
    (traced) side by side in order, their 28 px frames `gap` px apart and each moved down by half its row shift, both
    at MNIST's scale (as bench/pair_paths.py uploads the same pair written apart)."""
    half = APART_SCALE / 2 * (1 + gap / 28)
    return [
        place(trace(d / 255.0), APART_SCALE, side * half, (int(dy) // 2) / 28 * APART_SCALE)
        for d, (dy, _), side in zip(digits, shifts, (-1, 1), strict=True)
    ]
