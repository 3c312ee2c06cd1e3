"""The IDX reader takes MNIST's files from any directory and says clearly what is wrong with bad ones."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np
import pytest
import torch

from model.data import IDXError, load_mnist, random_shift, read_idx, to_tensor


def write_idx(path: Path, arr: np.ndarray, magic: int, gz: bool) -> None:
    header = struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in arr.shape)
    data = header + arr.astype(np.uint8).tobytes()
    if gz:
        with gzip.open(path.with_name(path.name + ".gz"), "wb") as f:
            f.write(data)
    else:
        path.write_bytes(data)


def make_split(directory: Path, split: str, n: int, gz: bool) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, n, dtype=np.uint8)
    stems = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"), "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}[
        split
    ]
    write_idx(directory / stems[0], images, 2051, gz)
    write_idx(directory / stems[1], labels, 2049, gz)
    return images, labels


@pytest.mark.parametrize("gz", [True, False])
def test_reads_gz_and_raw_files_from_any_directory(tmp_path, gz):
    images, labels = make_split(tmp_path, "test", 7, gz)
    got_x, got_y = load_mnist(tmp_path, "test")
    assert np.array_equal(got_x, images) and np.array_equal(got_y, labels)


def test_wrong_magic_number_is_named(tmp_path):
    write_idx(tmp_path / "x", np.zeros((2, 28, 28)), 2049, gz=False)
    with pytest.raises(IDXError, match="magic number 2049, expected 2051"):
        read_idx(tmp_path / "x", 2051)


def test_truncated_file_is_refused(tmp_path):
    make_split(tmp_path, "train", 5, gz=False)
    p = tmp_path / "train-images-idx3-ubyte"
    p.write_bytes(p.read_bytes()[:-100])
    with pytest.raises(IDXError, match="file has"):
        load_mnist(tmp_path, "train")


def test_corrupt_gzip_is_refused(tmp_path):
    (tmp_path / "t10k-images-idx3-ubyte.gz").write_bytes(b"not gzip at all")
    with pytest.raises(IDXError, match="cannot read"):
        read_idx(tmp_path / "t10k-images-idx3-ubyte.gz", 2051)


def test_missing_files_say_what_is_expected(tmp_path):
    with pytest.raises(IDXError, match="t10k-images-idx3-ubyte"):
        load_mnist(tmp_path, "test")


def test_mismatched_counts_are_refused(tmp_path):
    make_split(tmp_path, "test", 5, gz=True)
    write_idx(tmp_path / "t10k-labels-idx1-ubyte", np.zeros(4), 2049, gz=True)
    with pytest.raises(IDXError, match="do not match"):
        load_mnist(tmp_path, "test")


def test_shift_moves_by_at_most_two_pixels_with_zero_padding():
    x = torch.zeros(200, 1, 28, 28)
    x[:, 0, 10:18, 10:18] = 1.0
    shifted = random_shift(x, 2, torch.Generator().manual_seed(0))
    assert shifted.shape == x.shape
    assert torch.equal(shifted.sum((1, 2, 3)), x.sum((1, 2, 3)))  # the square never leaves the frame
    rows = shifted[:, 0].sum(2).gt(0).float().argmax(1) - 10
    cols = shifted[:, 0].sum(1).gt(0).float().argmax(1) - 10
    assert rows.abs().max() <= 2 and cols.abs().max() <= 2
    assert len(set(zip(rows.tolist(), cols.tolist()))) == 25  # every shift in [-2,2]^2 happens


def test_tensor_convention_is_zero_to_one_without_normalisation():
    t = to_tensor(np.array([[[0, 255]]], dtype=np.uint8))
    assert t.shape == (1, 1, 1, 2) and t.min() == 0.0 and t.max() == 1.0
