"""The lone digits and pairs the two-digit paths are measured on (bench/pair_paths.py, the page's tests), drawn
MultiMNIST's way; the pen strokes they are drawn with: model/pen_strokes.py."""

from __future__ import annotations

import numpy as np

MAX_SHIFT = 4  # each digit of a pair shifted up to this many px each way on the 36 px canvas, as MultiMNIST makes them


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
