"""MNIST from its original IDX files (.gz or raw), in any directory a user points at."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from model.idx import FILES, IMAGES_MAGIC, LABELS_MAGIC, IDXError, load_mnist, read_idx

__all__ = ["FILES", "IMAGES_MAGIC", "LABELS_MAGIC", "IDXError", "load_mnist", "load_tensors", "random_shift", "read_idx", "to_tensor"]


def to_tensor(images: np.ndarray) -> Tensor:
    """uint8 [N,28,28] -> float32 [N,1,28,28] in [0,1]: the network's input convention (no mean/std)."""
    return torch.from_numpy(images.astype(np.float32) / 255.0).unsqueeze(1)


def random_shift(x: Tensor, max_shift: int = 2, generator: torch.Generator | None = None) -> Tensor:
    """Shift each image by up to `max_shift` px in each direction, zero-padded: the paper's only augmentation."""
    if max_shift == 0:
        return x
    n, _, h, w = x.shape
    padded = torch.nn.functional.pad(x, (max_shift,) * 4)  # [N,1,h+2s,w+2s]
    # drawn where the images are (a generator there too), so that a GPU run makes its batches without leaving the GPU
    oy = torch.randint(0, 2 * max_shift + 1, (n,), generator=generator, device=x.device)
    ox = torch.randint(0, 2 * max_shift + 1, (n,), generator=generator, device=x.device)
    rows = (oy[:, None] + torch.arange(h, device=x.device))[:, :, None]  # [N,h,1]
    cols = (ox[:, None] + torch.arange(w, device=x.device))[:, None, :]  # [N,1,w]
    return padded[torch.arange(n, device=x.device)[:, None, None], 0, rows, cols].unsqueeze(1)


def load_tensors(directory: str | Path, limit: int = 0) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Training images and labels (the first `limit` when > 0, for smoke runs), then the 10k test ones, as the networks
    take them: float [N,1,28,28] in [0,1] and int64 labels."""
    train_x, train_y = load_mnist(directory, "train")
    test_x, test_y = load_mnist(directory, "test")
    if limit:
        train_x, train_y = train_x[:limit], train_y[:limit]
    return (to_tensor(train_x), torch.from_numpy(train_y.astype(np.int64)), to_tensor(test_x), torch.from_numpy(test_y.astype(np.int64)))
