"""Make any upload look like an MNIST digit: the network only knows that world.

MNIST's own recipe (LeCun et al.): the digit, bright on black, is scaled to fit a 20x20 box keeping
its aspect ratio (anti-aliased), then placed in 28x28 so that its centre of mass is at the centre.
Everything here is a pure function of arrays, so it is tested on arbitrary input.
"""
from __future__ import annotations

import functools

import numpy as np
from PIL import Image

INK_THRESHOLD = 0.1  # of the ink range, after background removal: what counts as ink for the bounding box


def flatten_alpha(rgb: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """Composite onto a background that contrasts with the opaque strokes.

    A canvas export is often ink on transparency; white ink flattened onto white would vanish, so the
    background is chosen from the strokes' own brightness.
    """
    a = np.clip(alpha, 0.0, 1.0)
    if rgb.ndim == 3:
        a = a[..., None]
    weight = a.sum()
    ink_level = float((rgb * a).sum() / (weight * (rgb.shape[-1] if rgb.ndim == 3 else 1))) if weight > 0 else 0.0
    background = 1.0 if ink_level < 0.5 else 0.0
    return rgb * a + background * (1.0 - a)


def to_grey(rgb: np.ndarray) -> np.ndarray:
    """ITU-R 601 luma, as Pillow's L mode: [H,W,3] or [H,W] in [0,1] -> [H,W]."""
    if rgb.ndim == 2:
        return rgb
    return rgb[..., 0] * 0.299 + rgb[..., 1] * 0.587 + rgb[..., 2] * 0.114


def ink_bright(grey: np.ndarray) -> np.ndarray:
    """Decide polarity from the border (paper or screen shows there) and remove the background level.

    Returns an image with background 0 and the strongest ink 1 (or all zeros when there is no ink).
    """
    h, w = grey.shape
    border = np.concatenate([grey[0, :], grey[-1, :], grey[:, 0], grey[:, -1]]) if h > 2 and w > 2 else grey.ravel()
    bg = _median(border)
    if bg > 0.5:
        grey, bg = 1.0 - grey, 1.0 - bg
    ink = np.maximum(grey - np.float32(bg), 0.0, dtype=np.float32)
    peak = float(ink.max()) if ink.size else 0.0
    if peak < 1e-3:
        return np.zeros_like(grey, dtype=np.float32)
    return np.divide(ink, np.float32(peak), out=ink)


def _median(values: np.ndarray) -> float:
    """np.median's value (the mean of the middle two for an even count) at a fifth of its overhead on ~100 values."""
    v = np.sort(values, axis=None)
    n = v.size
    return float(v[n // 2]) if n % 2 else float((v[n // 2 - 1] + v[n // 2]) / 2)


SMALL = 128  # crops up to this size are resized with cached weight matrices, larger ones by Pillow


def resize_bilinear(img: np.ndarray, height: int, width: int) -> np.ndarray:
    """Pillow's anti-aliased bilinear resize of a float32 image (it widens the filter when it shrinks, as MNIST's
    reduction did), to within a float32 rounding.

    Why not always Pillow: for the small crops a digit upload gives, wrapping the array as an image and back
    costs three times the resize itself; here it is two small matrix products whose weights are cached per size."""
    h, w = img.shape
    if max(h, w) > SMALL:
        return np.asarray(Image.fromarray(np.ascontiguousarray(img, dtype=np.float32)).resize((width, height), Image.Resampling.BILINEAR))
    out = np.asarray(img, dtype=np.float32)
    if width != w:  # Pillow's order: the horizontal pass first, into a float32 image
        out = (out @ _bilinear_weights(w, width).T).astype(np.float32)
    if height != h:
        out = (_bilinear_weights(h, height) @ out).astype(np.float32)
    return out


@functools.lru_cache(maxsize=512)
def _bilinear_weights(n_in: int, n_out: int) -> np.ndarray:
    """[n_out, n_in] float64: Pillow's precompute_coeffs (libImaging/Resample.c) for the bilinear filter."""
    scale = n_in / n_out
    filter_scale = max(scale, 1.0)
    support = filter_scale  # the bilinear filter's support is 1, widened by the scale when shrinking
    weights = np.zeros((n_out, n_in))
    for i in range(n_out):
        centre = (i + 0.5) * scale
        lo, hi = max(int(centre - support + 0.5), 0), min(int(centre + support + 0.5), n_in)
        k = np.maximum(1.0 - np.abs((np.arange(lo, hi) - centre + 0.5) / filter_scale), 0.0)
        weights[i, lo:hi] = k / k.sum() if k.sum() else k
    weights.setflags(write=False)
    return weights


def centre_of_mass(img: np.ndarray) -> tuple[float, float]:
    """(row, col) of the intensity-weighted centre; the image centre for a blank image."""
    h, w = img.shape
    rows, cols = img.sum(1, dtype=np.float64), img.sum(0, dtype=np.float64)
    total = float(rows.sum())
    if total <= 0:
        return (h - 1) / 2.0, (w - 1) / 2.0
    return float(rows @ np.arange(h, dtype=np.float64)) / total, float(cols @ np.arange(w, dtype=np.float64)) / total


def fit_and_centre(ink: np.ndarray, size: int = 28, box: int = 20) -> np.ndarray:
    """Crop to the ink, scale to fit box x box keeping aspect ratio, centre by mass in size x size."""
    out = np.zeros((size, size), dtype=np.float32)
    mask = ink > INK_THRESHOLD
    rows = np.flatnonzero(mask.any(1))
    if not rows.size:
        return out
    cols = np.flatnonzero(mask.any(0))
    crop = ink[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1]
    h, w = crop.shape
    scale = box / max(h, w)
    nh, nw = max(1, round(h * scale)), max(1, round(w * scale))
    patch = np.minimum(np.maximum(resize_bilinear(crop, nh, nw), 0.0), 1.0)
    cy, cx = centre_of_mass(patch)
    top = int(round((size - 1) / 2.0 - cy))
    left = int(round((size - 1) / 2.0 - cx))
    # Paste with clipping: a lopsided digit may put part of its box past the edge.
    r0, c0 = max(top, 0), max(left, 0)
    r1, c1 = min(top + nh, size), min(left + nw, size)
    if r1 > r0 and c1 > c0:
        out[r0:r1, c0:c1] = patch[r0 - top : r1 - top, c0 - left : c1 - left]
    return out


def to_mnist(pixels: np.ndarray, alpha: np.ndarray | None = None, size: int = 28, box: int = 20) -> np.ndarray:
    """Any picture of a digit, values in [0,1] ([H,W] grey or [H,W,3] colour, optional alpha [H,W]),
    -> float32 [size,size], background 0 and ink up to 1, as MNIST."""
    x = np.asarray(pixels, dtype=np.float32)
    x = np.fmax(np.minimum(x, 1.0), 0.0)  # into [0,1]; NaN -> 0 (minimum keeps a NaN, fmax drops it)
    if alpha is not None:
        x = flatten_alpha(x, np.nan_to_num(np.asarray(alpha, dtype=np.float32), nan=1.0))
    return fit_and_centre(ink_bright(to_grey(x)), size, box)
