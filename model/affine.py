"""Affine transforms of the network's 28x28 input, one definition for the equivariance probe (POST /probe) and the
robustness table (model/robustness.py), so that "30 degrees" means the same in both.

About the image centre, in image coordinates (x right, y down):  p' = c + R(rotate) Sh(shear) (scale p - c) + (tx, ty)
  rotate: degrees, counter-clockwise as the image is seen;  shear: degrees, positive leans the top to the right;
  scale: 1 keeps the size;  tx, ty: pixels right and down.  Bilinear, the outside is background (0).
numpy and OpenCV only: the service imports this (no torch).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np


@dataclass(frozen=True)
class Affine:
    rotate: float = 0.0
    scale: float = 1.0
    shear: float = 0.0
    tx: float = 0.0
    ty: float = 0.0

    def matrix(self, size: int) -> np.ndarray:
        """The forward map [2,3] from input to output pixel coordinates (OpenCV's warpAffine convention)."""
        th, sh = math.radians(self.rotate), math.tan(math.radians(self.shear))
        rot = np.array([[math.cos(th), math.sin(th)], [-math.sin(th), math.cos(th)]])
        shear = np.array([[1.0, -sh], [0.0, 1.0]])
        a = rot @ shear * self.scale
        c = np.full(2, (size - 1) / 2.0)
        return np.hstack([a, (c - a @ c + np.array([self.tx, self.ty]))[:, None]]).astype(np.float64)


def warp(images: np.ndarray, t: Affine) -> np.ndarray:
    """images float32 [..., S, S] in [0,1] -> the same shape, each transformed by t."""
    s = images.shape[-1]
    flat = images.reshape(-1, s, s)
    m = t.matrix(s)
    out = np.stack(
        [
            cv2.warpAffine(x, m, (s, s), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT, borderValue=0.0)
            for x in flat.astype(np.float32)
        ]
    )
    return np.clip(out, 0.0, 1.0).reshape(images.shape)
