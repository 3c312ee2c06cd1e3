"""The generator of realistic inputs is itself tested: accuracy figures built on it are only as good as its promises."""

from __future__ import annotations

import io

import cv2
import numpy as np
import pytest
from PIL import Image

from tests.service import realworld


def seven() -> np.ndarray:
    """A hand-made MNIST-like 7, so these tests need no dataset."""
    a = np.zeros((28, 28), np.uint8)
    cv2.polylines(a, [np.array([[7, 6], [21, 6], [12, 23]], np.int32)], False, 255, 3, cv2.LINE_AA)
    return a


def decode(data: bytes) -> Image.Image:
    im = Image.open(io.BytesIO(data))
    im.load()
    return im


def test_same_seed_same_bytes() -> None:
    rng = np.random.default_rng
    assert realworld.photo_of_digit(seven(), rng(3)) == realworld.photo_of_digit(seven(), rng(3))
    assert realworld.photo_of_digit(seven(), rng(3)) != realworld.photo_of_digit(seven(), rng(4))
    for kind in realworld.NON_DIGIT_KINDS:
        assert realworld.non_digit(rng(5), kind) == realworld.non_digit(rng(5), kind)
    for kind in realworld.BLANK_KINDS:
        assert realworld.blank(rng(6), kind) == realworld.blank(rng(6), kind)


@pytest.mark.parametrize("seed", range(12))
def test_photo_is_a_phone_sized_jpeg_or_png(seed: int) -> None:
    im = decode(realworld.photo_of_digit(seven(), np.random.default_rng(seed)))
    assert im.format in ("JPEG", "PNG") and im.mode == "RGB"
    assert min(im.size) >= 300 and max(im.size) <= 4032


def test_photos_vary_in_size_orientation_and_format() -> None:
    ims = [decode(realworld.photo_of_digit(seven(), np.random.default_rng(s))) for s in range(40)]
    assert len({im.size for im in ims}) > 30
    assert any(im.width > im.height for im in ims) and any(im.width < im.height for im in ims)
    assert {im.format for im in ims} == {"JPEG", "PNG"}


def test_digit_is_mostly_off_centre() -> None:
    off = 0
    for seed in range(20):
        gray = np.asarray(decode(realworld.photo_of_digit(seven(), np.random.default_rng(seed))).convert("L"), np.float32)
        small = cv2.resize(gray, (64, 64), interpolation=cv2.INTER_AREA)  # paper brightness, shadows included
        background = cv2.resize(cv2.GaussianBlur(small, (0, 0), 4), gray.shape[::-1])
        ys, xs = np.nonzero(gray < 0.7 * background)
        dy, dx = ys.mean() / gray.shape[0] - 0.5, xs.mean() / gray.shape[1] - 0.5
        off += max(abs(dy), abs(dx)) > 0.05
    assert off >= 14


@pytest.mark.parametrize("kind", realworld.NON_DIGIT_KINDS)
def test_non_digit_kinds_decode_in_both_styles(kind: str) -> None:
    sizes = set()
    for seed in range(8):
        got, data = realworld.non_digit(np.random.default_rng(seed), kind)
        im = decode(data)
        assert got == kind and im.format in ("JPEG", "PNG") and im.mode == "RGB"
        sizes.add(im.size == (280, 280) and im.format == "PNG")
    assert sizes == {True, False}  # both the page's canvas and a photo


def test_random_kinds_come_from_the_lists() -> None:
    assert {realworld.non_digit(np.random.default_rng(s))[0] for s in range(30)} == set(realworld.NON_DIGIT_KINDS)
    assert {realworld.blank(np.random.default_rng(s))[0] for s in range(20)} == set(realworld.BLANK_KINDS)


def test_blank_canvas_is_uniform_and_paper_is_a_photo() -> None:
    for seed in range(10):
        im = decode(realworld.blank(np.random.default_rng(seed), "canvas")[1])
        assert im.format == "PNG" and im.size == (280, 280) and im.mode in ("RGB", "RGBA")
        assert len(np.unique(np.asarray(im).reshape(-1, len(im.mode)), axis=0)) == 1
    paper = decode(realworld.blank(np.random.default_rng(0), "paper")[1])
    assert min(paper.size) >= 300 and np.asarray(paper.convert("L")).std() > 1
