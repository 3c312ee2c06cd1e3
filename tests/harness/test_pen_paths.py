"""harness/pen_paths.py: the lone digits and pairs the two-digit paths are measured on."""

from __future__ import annotations

import numpy as np

from harness.pen_paths import pair_items


def test_pairs_are_two_digits_of_different_classes_after_as_many_lone_ones() -> None:
    y = np.arange(100) % 10
    items = pair_items(np.zeros((100, 28, 28)), y, 5, seed=1)
    assert [len(i["digits"]) for i in items] == [1] * 5 + [2] * 5
    assert all(i["labels"][0] != i["labels"][1] for i in items[5:]) and all(np.abs(i["shifts"]).max() <= 4 for i in items)
