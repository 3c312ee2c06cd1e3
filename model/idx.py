"""MNIST's original IDX files (.gz or raw), read with numpy alone: the service reads the test digits with it (the page's
random pairs) and model.data builds the training tensors on it."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np

IMAGES_MAGIC = 2051
LABELS_MAGIC = 2049
FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}


class IDXError(ValueError):
    """An IDX file is missing, truncated or not what its name says."""


def _open_bytes(path: Path) -> bytes:
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as f:
                return f.read()
        return path.read_bytes()
    except (OSError, EOFError, gzip.BadGzipFile) as e:
        raise IDXError(f"{path}: cannot read ({e})") from e


def read_idx(path: str | Path, expect_magic: int) -> np.ndarray:
    """Read one IDX file, checking the magic number and that the payload has exactly the header's size."""
    path = Path(path)
    raw = _open_bytes(path)
    if len(raw) < 8:
        raise IDXError(f"{path}: {len(raw)} bytes is too short for an IDX header")
    magic = struct.unpack(">I", raw[:4])[0]
    if magic != expect_magic:
        raise IDXError(f"{path}: magic number {magic}, expected {expect_magic}")
    ndim = magic & 0xFF
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise IDXError(f"{path}: truncated header")
    shape = struct.unpack(">" + "I" * ndim, raw[4:header])
    size = int(np.prod(shape))
    if len(raw) - header != size:
        raise IDXError(f"{path}: header says {shape} = {size} bytes of data, file has {len(raw) - header}")
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(shape)


def _find(directory: Path, stem: str) -> Path:
    for name in (stem + ".gz", stem):
        if (directory / name).exists():
            return directory / name
    raise IDXError(f"{directory}: neither {stem}.gz nor {stem} found (expected MNIST's original IDX files)")


def load_mnist(directory: str | Path, split: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """Images uint8 [N,28,28] and labels uint8 [N] of one split."""
    directory = Path(directory)
    if not directory.is_dir():
        raise IDXError(f"{directory}: not a directory")
    img_stem, lbl_stem = FILES[split]
    images = read_idx(_find(directory, img_stem), IMAGES_MAGIC)
    labels = read_idx(_find(directory, lbl_stem), LABELS_MAGIC)
    if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
        raise IDXError(f"{directory} ({split}): images {images.shape} do not match labels {labels.shape}")
    if labels.size and labels.max() > 9:
        raise IDXError(f"{directory} ({split}): label {labels.max()} outside 0-9")
    return images, labels
