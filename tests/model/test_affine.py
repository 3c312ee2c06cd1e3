"""model/affine.py: the transforms mean what their names say, on a picture where it can be seen."""

from __future__ import annotations

import numpy as np

from model.affine import Affine, warp


def _dot(x: int, y: int) -> np.ndarray:
    img = np.zeros((28, 28), np.float32)
    img[y - 1 : y + 2, x - 1 : x + 2] = 1.0
    return img


def _centroid(img: np.ndarray) -> tuple[float, float]:
    ys, xs = np.mgrid[:28, :28]
    return float((xs * img).sum() / img.sum()), float((ys * img).sum() / img.sum())


def test_identity_changes_nothing():
    img = np.random.default_rng(0).random((28, 28), dtype=np.float32)
    np.testing.assert_allclose(warp(img, Affine()), img, atol=1e-6)


def test_rotation_is_counter_clockwise_as_seen():
    # a dot right of centre goes up (smaller y) when turned 90 degrees counter-clockwise
    x, y = _centroid(warp(_dot(20, 13), Affine(rotate=90)))
    assert abs(x - 13.5) < 0.6 and y < 8


def test_scale_shear_and_shift():
    x, _ = _centroid(warp(_dot(21, 13), Affine(scale=0.5)))
    assert abs(x - (13.5 + 0.5 * 7.5)) < 0.6
    x, _ = _centroid(warp(_dot(13, 5), Affine(shear=30)))  # above the centre: leans right
    assert x > 16
    x, y = _centroid(warp(_dot(13, 13), Affine(tx=3, ty=-2)))
    assert abs(x - 16) < 0.3 and abs(y - 11) < 0.3


def test_batches_keep_their_shape_and_range():
    imgs = np.random.default_rng(1).random((3, 1, 28, 28), dtype=np.float32)
    out = warp(imgs, Affine(rotate=20, scale=1.3))
    assert out.shape == imgs.shape and out.min() >= 0 and out.max() <= 1
