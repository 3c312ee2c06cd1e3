"""MNIST's test digits, where the server has them, and two of them overlaid as MultiMNIST's test pairs are: the page's
"Two random test digits" (GET /multimnist/sample)."""

from __future__ import annotations

from pathlib import Path

import numpy as np


class TestDigits:
    """MNIST's test digits, read once from `directory` when the page first asks for a random pair (None: not there)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._loaded: tuple[np.ndarray, np.ndarray] | None = None

    def available(self) -> bool:
        return self._loaded is not None or any((self.directory / f"t10k-images-idx3-ubyte{gz}").exists() for gz in (".gz", ""))

    def load(self) -> tuple[np.ndarray, np.ndarray]:
        if self._loaded is None:
            from model.idx import load_mnist

            self._loaded = load_mnist(self.directory, "test")
        return self._loaded


def sample_pair(images: np.ndarray, labels: np.ndarray, size: int, shift: int, rng: np.random.Generator) -> tuple[np.ndarray, list[int]]:
    """Two test digits of different classes on a `size` canvas as model/multimnist.py makes test pairs: each centred,
    shifted up to `shift` px each way (the card's max_shift), added and clipped to [0,1]."""
    first = int(rng.integers(len(images)))
    second = int(rng.integers(len(images)))
    while labels[second] == labels[first]:
        second = int(rng.integers(len(images)))
    canvas = np.zeros((size, size), np.float32)
    for i in (first, second):
        digit = images[i].astype(np.float32) / 255.0
        top, left = (size - digit.shape[0]) // 2 + rng.integers(-shift, shift + 1, 2)
        canvas[top : top + digit.shape[0], left : left + digit.shape[1]] += digit
    return np.minimum(canvas, 1.0), [int(labels[first]), int(labels[second])]
