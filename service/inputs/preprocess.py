"""Make any upload look like an MNIST digit: the network only knows that world.

Two halves. First find the digit: a phone photo has uneven light, shadows, paper grain, sensor noise, ruled lines and
a digit small and off centre, so the paper's own brightness is estimated and divided out, the contrast that is left is
thresholded above the paper's noise, and the digit is taken as the strongest group of ink components (specks, ruled
lines and frame edges dropped). Then MNIST's own recipe (LeCun et al.): the digit, bright on black, is scaled to fit a
20x20 box keeping its aspect ratio (anti-aliased), then placed in 28x28 so that its centre of mass is at the centre.
Everything here is a pure function of arrays (OpenCV for the image processing), so it is tested on arbitrary input.
"""

from __future__ import annotations

import cv2
import numpy as np
from PIL import Image

# OpenCV hands even a 28x28 image's work to its own thread pool: on the event loop that cost more than the work (measured
# per /predict at concurrency 1, BENCHMARKS.md). Large uploads get their parallelism from the decode pool instead.
cv2.setNumThreads(1)

INK_THRESHOLD = 0.1  # of the ink range, after background removal: what counts as ink for the bounding box
WORK_SIDE = 1024  # the digit is looked for at most this large: a 12 MP photo's digit keeps 80+ px, and the work stays ~10 ms
FLAT_BELOW = 64  # smaller images (an MNIST-sized upload) hold no shading to remove: one paper level, from the border
UNIFORM_SHARE = 0.5  # ... nor does a canvas export or a clean scan: half its border at one level ...
UNIFORM_IMAGE_SHARE = 0.2  # ... and of the whole image (a tight crop's ink and its smoothed edges can cover most of it)
UNIFORM_TOLERANCE = 2.0 / 255.0  # one level: within two 8-bit steps
PAPER_SIDE = 160  # the paper's brightness changes slowly, so it is first estimated on a copy at most this large ...
STROKE_PX = 4.0  # ... and then, around strokes of known width, on one where a stroke is at most this wide
MIN_CONTRAST = 0.12  # ink is at least this much darker than the paper around it (a fraction of the paper's brightness) ...
NOISE_SIGMAS = 6.0  # ... and stands this many standard deviations of the paper's own texture and noise above it
INK_LIKE_SPREAD = 0.5  # six "noise" sigmas past half the ink range: that spread is ink's, not the paper's grain
MIN_PEAK = 0.3  # the digit's strongest stroke has at least this contrast: fainter marks are paper texture, not a digit
GROUP_MARGIN = 0.4  # other components within this fraction of the main one's size belong to the same digit (a 5's flag)
GROUP_MIN_MASS = 0.05  # ... when they carry at least this share of its ink (smaller ones are specks)
SECOND_MIN_MASS = 0.2  # looking for two digits: the strongest component beside the first group, when it has this share of its ink
SIDE_GAP = 0.15  # two digits side by side: a band of empty columns (or rows) at least this share of the ink's height (width) ...
SIDE_MASS = 0.15  # ... with at least this share of the ink on each side ...
# ... and each side this share of the whole's height (of the taller side's, one above the other): a digit, not a dot or a dash
SIDE_SPAN = 0.5
SIDE_SHIFT = 2  # px each of two digits written side by side is laid from the centre, towards its side
BOLD_STROKE = 0.13  # strokes this wide for a digit's longer side (stroke_width; MNIST's 0.07-0.13, the page's pen 0.10-0.12) ...
THIN_STROKE = 0.08  # ... are worn down aiming at this, which leaves the page's half-size digits at 0.10-0.12, as its full-size ones
THIN_SIDE = 112  # px: the longer side a digit is worn down at, at most (four times MNIST's frame)
MIN_MARK_PX = 12  # fewer pixels than this is a speck of dust or a hot pixel: the smallest MNIST digit has 45 of 784 ...
MIN_MARK_SHARE = 3e-4  # ... and in a large frame, fewer than this share of it (a photographed digit covers 0.28% or more)
SOFT_EDGE = 0.3  # on a thumbnail, a stroke's edge climbs at least this share of its contrast per pixel ...
FAINT_PEAK = 0.45  # ... or the mark is this strong: a soft, faint patch there is the light's slope or a shadow, not ink
TIGHT_SIDE = 128  # a photographed digit that reaches the frame's edge is read on a copy at most this large ...
TIGHT_BLUR = 1.0  # ... its grain smoothed by a Gaussian this wide (px) at that size, narrower on a smaller image ...
TIGHT_CONTRAST = 0.3  # ... two levels this far apart (ink on paper; a shadow on paper is less) ...
TIGHT_INK = 0.25  # ... where ink is at least this far from the paper's level towards the ink's
TIGHT_SPAN = 0.6  # a digit is tightly cropped when its ink spans this share of the frame's width and height ...
TIGHT_INK_SHARE = 0.12  # ... and its ink covers this share of it (lines that span a photo cover less) ...
PHOTO_SPAN = 0.5  # ... and what the photo passes found reaches the edge or spans this share: a photographed digit is smaller
DRAWING_GROUND = 0.5  # a drawing: at least this share of the picture fully transparent (its ground) ...
DRAWING_TOLERANCE = 4.0 / 255.0  # ... and what is opaque one colour, within this (a premultiplied canvas rounds its edges' colour)


def flatten_alpha(rgb: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """Composite onto a background that contrasts with the opaque strokes.

    A canvas export is often ink on transparency; white ink flattened onto white would vanish, so the
    background is chosen from the strokes' own brightness (their luma, once `rgb` is grey).
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


def shrink(grey: np.ndarray, side: int) -> np.ndarray:
    """Area-average down to at most `side` on the longer edge (a no-op for smaller images)."""
    h, w = grey.shape
    scale = side / max(h, w)
    if scale >= 1.0:
        return grey
    return cv2.resize(grey, (max(1, round(w * scale)), max(1, round(h * scale))), interpolation=cv2.INTER_AREA)


def _border(grey: np.ndarray) -> np.ndarray:
    """The outermost rows and columns, where the paper shows however the digit is framed."""
    return np.concatenate([grey[0], grey[-1], grey[:, 0], grey[:, -1]])


def flat_level(grey: np.ndarray, border_median: float | None = None) -> np.float32:
    """One paper level for the whole image, the median of its border (`border_median`, when the caller has read it):
    right for scans, canvases and MNIST-sized uploads, where there is no shading to follow. A float32 scalar, which
    every use broadcasts over the float32 image: the same values as an image of it, for none of the passes over one."""
    h, w = grey.shape
    if h > 2 and w > 2:
        return np.float32(_median(_border(grey)) if border_median is None else border_median)
    return np.float32(_median(grey.ravel()))


def uniform_paper(grey: np.ndarray) -> bool:
    """The paper is one exact level (a page canvas export, a clean scan): half the border and a fifth of the image
    within two 8-bit steps of the border's median. There the estimates of uneven light (wide_level, stroke_level) have
    nothing to find: they cost a canvas most of its preprocessing time (BENCHMARKS.md, Real input) and took a stroke
    drawn as a filled blob for a shadow, hollowing it to a ring. Not all of the border, nor most of the image: a tight
    crop's strokes reach the border (MNIST's test digits cropped to their ink keep paper, within two steps of the
    border's median, on 69% of their border on average, on less than half in 2.9% of them), and its ink and smoothed
    edges can cover most of the image. A photo's grain and uneven light never pass this."""
    border = _border(grey)
    return _uniform(grey, border, _median(border))


def _uniform(grey: np.ndarray, border: np.ndarray, level: float) -> bool:
    h, w = grey.shape
    if float(np.count_nonzero(np.abs(border - level) <= UNIFORM_TOLERANCE)) < UNIFORM_SHARE * border.size:
        return False
    sample = grey[:: max(1, h // 64), :: max(1, w // 64)]
    return float(np.count_nonzero(np.abs(sample - level) <= UNIFORM_TOLERANCE)) >= UNIFORM_IMAGE_SHARE * sample.size


def wide_level(grey: np.ndarray, dark_ink: bool) -> np.ndarray:
    """The paper's brightness when nothing is known of the strokes yet: a closing (an opening for light ink) with a disc
    a sixth of the image wide fills in every stroke, while light that changes gradually, and shadows wider than that,
    stay (a closing keeps a step where it is). On a small copy: light changes slowly, and the area average takes
    the sensor noise out before the closing, which would otherwise lift the level to the noise's peaks."""
    h, w = grey.shape
    small = shrink(grey, PAPER_SIDE)
    k = max(3, min(small.shape) // 6 | 1)
    disc = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k, k))
    level = cv2.morphologyEx(small, cv2.MORPH_CLOSE if dark_ink else cv2.MORPH_OPEN, disc)
    level = cv2.GaussianBlur(level, (0, 0), 1.0)
    return cv2.resize(level, (w, h), interpolation=cv2.INTER_LINEAR) if level.shape != (h, w) else level


def median_level(grey: np.ndarray) -> np.ndarray:
    """A level that takes no side: a median over windows a third of the image wide, for telling the ink's colour."""
    small = shrink(grey, PAPER_SIDE // 2)
    k = max(3, min(small.shape) // 3 | 1)
    level = cv2.medianBlur((small * 255.0 + 0.5).astype(np.uint8), k).astype(np.float32) / 255.0
    return cv2.resize(level, grey.shape[::-1], interpolation=cv2.INTER_LINEAR)


def stroke_level(grey: np.ndarray, stroke: float, dark_ink: bool) -> np.ndarray:
    """The paper's brightness once the stroke width is known: a morphological closing (an opening for light ink) with
    a disc three strokes wide fills the strokes in with the paper around them but keeps anything wider, so a cast
    shadow's edge stays where it is and is divided out instead of read as ink."""
    h, w = grey.shape
    small = shrink(grey, max(16, round(max(h, w) * min(1.0, STROKE_PX / max(stroke, 1e-3)))))  # the disc's cost grows with its area
    scale = small.shape[0] / h
    small = cv2.GaussianBlur(small, (0, 0), max(1.0, stroke * scale / 3))  # else the closing lifts the level to the grain's peaks
    k = max(3, int(3.0 * stroke * scale + 2) | 1)
    disc = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k, k))
    level = cv2.morphologyEx(small, cv2.MORPH_CLOSE if dark_ink else cv2.MORPH_OPEN, disc)
    return cv2.resize(level, (w, h), interpolation=cv2.INTER_LINEAR) if level.shape != (h, w) else level


def dark_ink(grey: np.ndarray, level: np.ndarray | np.float32) -> bool:
    """Ink is the minority whichever colour it is, so it is the side with clearly more deviation from the paper beyond
    the noise; grain and sensor noise are symmetric, so without a clear winner light paper means dark ink."""
    dev = grey - level
    noise = 3.0 * _robust_sigma(dev) + 0.02
    dark, bright = float(np.maximum(-dev - noise, 0).sum()), float(np.maximum(dev - noise, 0).sum())
    paper = float(level) if np.ndim(level) == 0 else _median(level[::8, ::8])
    return not ((bright > 2.0 * dark) if paper >= 0.5 else (bright >= 0.5 * dark))


def contrast(grey: np.ndarray, level: np.ndarray | np.float32, dark: bool) -> np.ndarray:
    """How much darker (for light ink on a dark ground, brighter) each pixel is than its paper, as a fraction of the
    room the paper leaves: 0 paper, 1 black ink on any paper, negative the other way (signed, so the paper's own
    noise can be measured on it)."""
    if dark:
        return (level - grey) / np.maximum(level, 0.05)
    return (grey - level) / np.maximum(1.0 - level, 0.05)


def _robust_sigma(values: np.ndarray) -> float:
    """The standard deviation of the bulk (paper), from the median absolute value: ink strokes, a minority, do not move it."""
    return 1.4826 * _quantile(np.abs(values), 0.5)


def _median(values: np.ndarray) -> float:
    """np.median's value (the mean of the two middle values of an even count) from one sort: the arrays here hold tens
    to thousands of values, where np.median's own dispatch cost more than the work (measured: 28 us a call against 3)."""
    v = np.sort(values, axis=None)
    half = v.size // 2
    return float(v[half] if v.size % 2 else (v[half - 1] + v[half]) / 2)


def _quantile(values: np.ndarray, q: float) -> float:
    """The q-quantile (lower value, no interpolation) of at most ~8k evenly spread samples: plenty for a noise level or
    a stroke's strength, and np.partition degrades on images of many equal values (an empty canvas) to ~4 ms."""
    v = values.ravel()
    if not v.size:
        return 0.0
    v = np.sort(v[:: v.size // 8192 + 1])
    return float(v[min(int(q * v.size), v.size - 1)])


def paper_and_noise(smooth: np.ndarray) -> tuple[float, float]:
    """The paper's level and noise in a contrast image, where paper is near 0 and ink lies above it.

    The median of every pixel and its spread, as long as they look like paper. In a tight crop the ink can be half the
    image or more (a 1 cropped to its own stroke), and then the median is ink, or its spread is the ink's rather than the
    paper's grain: then the paper is measured on what cannot be ink (below MIN_CONTRAST), and its noise on the paper's
    own lower side, which ink never reaches."""
    paper = _quantile(smooth, 0.5)
    sigma = _robust_sigma(smooth - paper)
    if paper < MIN_CONTRAST / 2 and NOISE_SIGMAS * sigma < INK_LIKE_SPREAD:
        return paper, sigma
    below = smooth[smooth < MIN_CONTRAST]
    if below.size < 0.2 * smooth.size:  # the level estimate left the paper itself above the bar: keep the plain figures
        return paper, sigma
    paper = _quantile(below, 0.5)
    lower = below[below <= paper] - paper
    return paper, 1.4826 * _quantile(np.abs(lower), 0.5) if lower.size else 0.0


def ink_mask(signed: np.ndarray) -> np.ndarray:
    """Pixels that are ink: above MIN_CONTRAST and NOISE_SIGMAS of the paper's own texture and noise, measured after a
    slight blur that averages sensor noise away but not strokes; without ruled lines (horizontal runs a third of the
    frame wide)."""
    h, w = signed.shape
    smooth = cv2.GaussianBlur(signed, (0, 0), max(h, w) / 400.0) if max(h, w) >= 200 else signed
    paper, sigma = paper_and_noise(smooth)
    mask = (smooth > paper + max(MIN_CONTRAST, NOISE_SIGMAS * sigma)).astype(np.uint8)
    if w >= 90:  # ruled lines: long horizontal runs that are thin (a big digit's thick stroke can be as long)
        lines = cv2.morphologyEx(mask, cv2.MORPH_OPEN, cv2.getStructuringElement(cv2.MORPH_RECT, (w // 3, 1)))
        thick = cv2.morphologyEx(mask, cv2.MORPH_OPEN, cv2.getStructuringElement(cv2.MORPH_RECT, (1, max(4, h // 80))))
        mask &= 1 - (lines & (1 - thick))
    return mask


def strongest_group(signed: np.ndarray, digits: int = 1) -> tuple[np.ndarray, np.ndarray] | None:
    """The strongest group of ink components as a mask, with the ink mask it came from; None when there is none. With
    `digits` 2, a second group too: the strongest component outside the first, when it carries SECOND_MIN_MASS of the
    first's strongest component's ink, with those near it: two digits written apart are two groups, an overlapping pair one.

    Strongest: the most strong ink (contrast summed over the component's pixels of at least half the image's peak
    contrast). Dropped: frame edges (thin components along a
    border for most of its length). Grouped: components near the strongest one that carry a real share of ink, since
    a hand-written 5 or 4 is often two strokes, and a thin stroke can break."""
    h, w = signed.shape
    mask = ink_mask(signed)
    count, labels, stats, _ = cv2.connectedComponentsWithStats(mask, connectivity=8)
    if count <= 1:
        return None
    # Strong ink only: a pen stroke is the most contrasted thing on the page, a shadow's or a stain's large area of
    # faint contrast must not outweigh it.
    # the masks here hold 0 and 1 (ink_mask's, and the components kept below): read as booleans without a pass
    strong = (signed >= 0.5 * _quantile(signed[mask.view(bool)], 0.995)).ravel()
    mass = np.bincount(labels.ravel(), weights=np.where(strong, np.clip(signed, 0.0, 1.0).ravel(), 0.0), minlength=count)
    x, y, bw, bh = stats[:, 0], stats[:, 1], stats[:, 2], stats[:, 3]
    edge = (((x == 0) | (x + bw == w)) & (bh >= 0.6 * h) & (bw <= 0.15 * w)) | (
        ((y == 0) | (y + bh == h)) & (bw >= 0.6 * w) & (bh <= 0.15 * h)
    )
    mass[0] = 0.0
    mass[edge] = 0.0
    main = int(mass.argmax())
    if mass[main] <= 0:
        return None

    def group(k: int) -> np.ndarray:
        """Component k and those near it that carry a real share of its ink."""
        margin = GROUP_MARGIN * max(bw[k], bh[k])
        x0, y0, x1, y1 = x[k] - margin, y[k] - margin, x[k] + bw[k] + margin, y[k] + bh[k] + margin
        return (x < x1) & (x + bw > x0) & (y < y1) & (y + bh > y0) & (mass >= GROUP_MIN_MASS * mass[k])

    near = group(main)
    if digits == 2:
        rest = np.where(near, 0.0, mass)
        second = int(rest.argmax())
        if rest[second] >= SECOND_MIN_MASS * mass[main]:
            near |= group(second) & (rest > 0)
    keep = near.astype(np.uint8)[labels]
    if np.count_nonzero(keep) < max(MIN_MARK_PX, MIN_MARK_SHARE * h * w) or float(signed[keep.view(bool)].max()) < MIN_PEAK:
        return None  # blank paper: a speck, or marks too faint to be a stroke
    return keep, mask


def stroke_width(keep: np.ndarray) -> float:
    """Twice the area over the perimeter: a stroke of width s and length L has area sL and about 2L edge pixels. Beyond
    the frame is no ink (OpenCV's erosion takes it for ink by default): else a stroke cropped tight, as `thinned` crops
    a digit, has no edge along the crop's sides, and a 1 drawn as a bar 20 px wide measured 59."""
    edge = np.count_nonzero(keep & (1 - cv2.erode(keep, np.ones((3, 3), np.uint8), borderType=cv2.BORDER_CONSTANT, borderValue=0)))
    return 2.0 * np.count_nonzero(keep) / max(edge, 1)


def find_digit(grey: np.ndarray, digits: int = 1) -> np.ndarray:
    """Grey [H,W] in [0,1] -> the digit's ink, bright on black, strokes scaled to full strength; zeros when there is none.
    `digits` 2: the ink of up to two digits apart (strongest_group).

    Two passes on a large photo (one on a small image or on uniform paper, which have one paper level): the first,
    against a wide median of the paper, finds the digit and so its stroke width; the second measures the paper again at
    that scale (stroke_level), which follows shadows the first blurs."""
    h, w = grey.shape
    grey = grey.astype(np.float32, copy=False)
    border = _border(grey)
    paper = _median(border)
    uniform = _uniform(grey, border, paper)
    if not (min(h, w) < FLAT_BELOW or uniform):
        signed, found = _photo_passes(grey, dark_ink(grey, median_level(grey)), digits)
        if (tight := _tight_photo(grey)) is not None and (_maybe_tight(found) or _fills_frame(tight)):
            return tight
        return _strokes(signed, found)
    level = flat_level(grey, paper)
    dark = dark_ink(grey, level)
    signed = contrast(grey, level, dark)
    found = strongest_group(signed, digits)
    if found is None:
        # The border's median was ink: a crop as tight as a 1 drawn as a bar is mostly ink, border too. Then the paper is
        # at one of the border's extremes (on a border of one level, a blank, both are the median again: still nothing).
        for extreme in (_quantile(border, 0.9), _quantile(border, 0.1)):
            level = np.float32(extreme)
            dark = dark_ink(grey, level)
            signed = contrast(grey, level, dark)
            if (found := strongest_group(signed, digits)) is not None:
                break
    if not uniform and found is not None and (tight := _tight_photo(grey)) is not None and _fills_frame(tight):
        return tight  # a small photo: its light can change across it too
    if found is not None and min(h, w) < FLAT_BELOW and _soft_and_faint(signed, found[0]):
        found = None  # a thumbnail of empty paper under a lamp: too small to take its light out, so judged by the mark's shape
    return _strokes(signed, found)


def _soft_and_faint(signed: np.ndarray, keep: np.ndarray) -> bool:
    """A patch whose contrast rises slowly (a shadow's or a lamp's gradient) and stays faint: pen strokes and printed
    glyphs have edges that climb to their contrast within a pixel or two, however small the image."""
    peak = _quantile(signed[keep > 0], 0.95)
    if peak >= FAINT_PEAK:
        return False
    gradient = np.hypot(cv2.Sobel(signed, cv2.CV_32F, 1, 0, ksize=3), cv2.Sobel(signed, cv2.CV_32F, 0, 1, ksize=3)) / 8.0
    around = cv2.dilate(keep, np.ones((3, 3), np.uint8)) > 0
    return _quantile(gradient[around], 0.95) < SOFT_EDGE * peak


Found = tuple[np.ndarray, np.ndarray] | None  # strongest_group's: the digit's components and the ink mask


def _photo_passes(grey: np.ndarray, dark: bool, digits: int = 1) -> tuple[np.ndarray, Found]:
    """The digit against a wide estimate of the paper, then against one three strokes wide (find_digit says why)."""
    signed = contrast(grey, wide_level(grey, dark), dark)
    found = strongest_group(signed, digits)
    if found is not None:
        signed = contrast(grey, stroke_level(grey, stroke_width(found[0]), dark), dark)
        found = strongest_group(signed, digits)
    return signed, found


def _touches_edge(keep: np.ndarray) -> bool:
    return bool(keep[0].any() or keep[-1].any() or keep[:, 0].any() or keep[:, -1].any())


def _spans(mask: np.ndarray, share: float) -> bool:
    """The mask spans at least `share` of the frame both ways."""
    h, w = mask.shape
    rows, cols = np.flatnonzero(mask.any(1)), np.flatnonzero(mask.any(0))
    return bool(rows.size and rows[-1] - rows[0] + 1 >= share * h and cols[-1] - cols[0] + 1 >= share * w)


def _fills_frame(ink: np.ndarray) -> bool:
    """A digit cropped to itself: its ink spans most of the frame both ways and covers a good share of it (15-68% in the
    tight crops of tests/service/test_tight_crops.py). Lines that span a photo (ruled lines, a frame, a shadow's rim)
    cover little (at most 9% in its photos)."""
    return _spans(ink > INK_THRESHOLD, TIGHT_SPAN) and float(np.count_nonzero(ink > 0.5)) >= TIGHT_INK_SHARE * ink.size


def _maybe_tight(found: Found) -> bool:
    """What the photo passes found could be part of a tightly cropped digit: it reaches the frame's edge, or it is as
    large as no photographed digit is (those fill at most half the frame). Nothing found stays nothing: blank paper."""
    return found is not None and (_touches_edge(found[0]) or _spans(found[0] > 0, PHOTO_SPAN))


def _otsu(values: np.ndarray) -> float:
    """Otsu's threshold (OpenCV's, on 8 bits): the level that best splits the values into two classes."""
    u8 = np.clip(values * 255.0 + 0.5, 0, 255).astype(np.uint8)
    t, _ = cv2.threshold(u8.reshape(-1, 1), 0, 255, cv2.THRESH_BINARY + cv2.THRESH_OTSU)
    return float(t) / 255.0


def _paper_side(flat: np.ndarray) -> np.ndarray:
    """Otsu's two classes, and which one is paper: the one that holds more of the border and of the image together (a
    tight crop's ink can hold most of its border, as a 0 cut at the edge does, or most of its area, as a bold 1)."""
    above = flat > _otsu(flat)
    share = _border(above.astype(np.float32)).mean() + float(above.mean())
    return above if share >= 1.0 else ~above


def _tight_photo(grey: np.ndarray) -> np.ndarray | None:
    """A photographed digit that reaches the frame's edge: its ink, bright on black, or None when two levels cannot be told.

    The photo path's paper estimates (closings some strokes wide) cannot see paper around a stroke that runs off the
    frame, nor fill strokes as thick as a tight crop scaled up makes them: they take ink for paper and the digit comes
    out hollow or cut. A tight crop is small enough for light to change little across it, so here the paper is a plane
    (the light's slope) fitted to the pixels Otsu's threshold puts on the paper's side, which is the side most of the
    border is on (the ink leaves most of the border free even in a tight crop); fitted again on the flattened image,
    twice, then ink is what lies past the threshold, scaled by the ink's own level."""
    g = shrink(grey, TIGHT_SIDE)
    h, w = g.shape
    g = cv2.GaussianBlur(g, (0, 0), TIGHT_BLUR * max(h, w) / TIGHT_SIDE)  # a thumbnail's strokes are 1-2 px: not smeared
    ys, xs = np.mgrid[0:h, 0:w].astype(np.float32)
    design = np.stack([np.ones(h * w, np.float32), xs.ravel() / w, ys.ravel() / h], 1)
    flat = g
    for _ in range(3):
        paper = _paper_side(flat)
        coef, *_ = np.linalg.lstsq(design[paper.ravel()], g.ravel()[paper.ravel()], rcond=None)
        plane = (design @ coef).reshape(h, w).astype(np.float32)
        flat = g - plane + float(np.median(plane))
    paper = _paper_side(flat)
    if paper.all() or not paper.any():
        return None
    paper_level, ink_level = _median(flat[paper]), _median(flat[~paper])
    if abs(ink_level - paper_level) < TIGHT_CONTRAST:
        return None  # two levels of paper (a shadow's edge), or none
    ink = np.clip((flat - paper_level) / (ink_level - paper_level), 0.0, 1.0)
    return np.where(ink > TIGHT_INK, ink, 0.0).astype(np.float32)


def _strokes(signed: np.ndarray, found: Found) -> np.ndarray:
    """The found digit's ink from the contrast image, strokes scaled to full strength."""
    if found is None:
        return np.zeros_like(signed)
    h, w = signed.shape
    keep, mask = found
    r = max(1, round(max(h, w) / 300))  # the strokes' soft edges lie just outside the mask
    keep = cv2.dilate(keep, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * r + 1, 2 * r + 1)))
    digit = np.minimum(np.maximum(signed, 0.0), 1.0) * keep  # np.clip's, without its dispatch
    strength = _quantile(digit[(mask & keep).view(bool)], 0.95)  # both masks 0/1, as strongest_group made them
    return np.minimum(digit / max(strength, MIN_PEAK), 1.0)


def resize_bilinear(img: np.ndarray, height: int, width: int) -> np.ndarray:
    """Pillow's anti-aliased bilinear resize of a float32 image: it widens the filter when it shrinks, as MNIST's
    reduction did. In and out through buffers (read-only, as np.asarray of an image is): fromarray's and asarray's
    checks cost more than the resize on a digit's 20x20."""
    h, w = img.shape
    src = Image.frombuffer("F", (w, h), np.ascontiguousarray(img, dtype=np.float32), "raw", "F", 0, 1)
    return np.frombuffer(src.resize((width, height), Image.Resampling.BILINEAR).tobytes(), np.float32).reshape(height, width)


def centre_of_mass(img: np.ndarray) -> tuple[float, float]:
    """(row, col) of the intensity-weighted centre; the image centre for a blank image."""
    h, w = img.shape
    rows, cols = img.sum(1, dtype=np.float64), img.sum(0, dtype=np.float64)
    total = float(rows.sum())
    if total <= 0:
        return (h - 1) / 2.0, (w - 1) / 2.0
    return float(rows @ np.arange(h, dtype=np.float64)) / total, float(cols @ np.arange(w, dtype=np.float64)) / total


def ink_box(ink: np.ndarray, threshold: float) -> np.ndarray | None:
    """The image cropped to the rows and columns that hold ink (values above `threshold`); None when none do."""
    x, y, w, h = cv2.boundingRect((ink > threshold).view(np.uint8))  # of the nonzero pixels: one call for four
    return ink[y : y + h, x : x + w] if w else None


def fit_and_centre(ink: np.ndarray, size: int = 28, box: int = 20) -> np.ndarray:
    """Crop to the ink, scale to fit box x box keeping aspect ratio, centre by mass in size x size."""
    out = np.zeros((size, size), dtype=np.float32)
    crop = ink_box(ink, INK_THRESHOLD)
    if crop is None:
        return out
    h, w = crop.shape
    scale = box / max(h, w)
    nh, nw = max(1, round(h * scale)), max(1, round(w * scale))
    # a digit that fits the box already (an MNIST digit: the ink of 99.7% of them is 20 px on its longer side once found)
    # is its own resize: Pillow copies an image resized to its own size, and that copy through its buffers cost more than
    # finding the digit
    patch = crop.astype(np.float32, copy=False) if (nh, nw) == (h, w) else resize_bilinear(crop, nh, nw)
    patch = np.minimum(np.maximum(patch, 0.0), 1.0)
    cy, cx = centre_of_mass(patch)
    top = int(round((size - 1) / 2.0 - cy))
    left = int(round((size - 1) / 2.0 - cx))
    # Paste with clipping: a lopsided digit may put part of its box past the edge.
    r0, c0 = max(top, 0), max(left, 0)
    r1, c1 = min(top + nh, size), min(left + nw, size)
    if r1 > r0 and c1 > c0:
        out[r0:r1, c0:c1] = patch[r0 - top : r1 - top, c0 - left : c1 - left]
    return out


def side_by_side(ink: np.ndarray) -> tuple[np.ndarray, np.ndarray, int] | None:
    """Two digits written apart, as people write two digits: the ink split at the widest band of empty columns between
    them (or of empty rows, one written above the other), and the axis it was split along (1: columns, 0: rows). None
    for ink that is one piece both ways: one digit (a broken stroke leaves a narrow band, or one side a dot or a dash),
    or two drawn over each other, as the network's test pairs are."""
    mask = ink > INK_THRESHOLD
    rows, cols = np.flatnonzero(mask.any(1)), np.flatnonzero(mask.any(0))
    if rows.size < 2 or cols.size < 2:
        return None
    total = float(ink.sum())
    for axis, filled, across in ((1, cols, rows), (0, rows, cols)):
        gaps = np.diff(filled) - 1
        extent = int(across[-1] - across[0] + 1)
        # every band wide enough, the widest first: a stray dot or dash apart from the digits leaves a band that fails
        # the checks below, and the one between the digits may be narrower
        for k in np.argsort(-gaps, kind="stable"):
            if gaps[k] < SIDE_GAP * extent:
                break
            cut = int(filled[k]) + 1
            first, second = ink.copy(), ink.copy()
            first[(slice(None),) * axis + (slice(cut, None),)] = 0.0
            second[(slice(None),) * axis + (slice(None, cut),)] = 0.0
            if min(float(first.sum()), float(second.sum())) < SIDE_MASS * total:
                continue
            # a digit's height is what a dot or a dash lacks (a 1 has no width to speak of): each side's height against
            # the whole's beside each other, against the taller side's one above the other
            heights = [int(np.ptp(np.flatnonzero((part > INK_THRESHOLD).any(1)))) + 1 for part in (first, second)]
            if min(heights) < SIDE_SPAN * (extent if axis == 1 else max(heights)):
                continue
            return first, second, axis
    return None


def _shifted(img: np.ndarray, by: int, axis: int) -> np.ndarray:
    """img moved `by` px along `axis`, zeros coming in (no wrap-around)."""
    out = np.zeros_like(img)
    n = img.shape[axis]
    src = [slice(None)] * img.ndim
    dst = [slice(None)] * img.ndim
    src[axis], dst[axis] = (slice(0, n - by), slice(by, n)) if by >= 0 else (slice(-by, n), slice(0, n + by))
    out[tuple(dst)] = img[tuple(src)]
    return out


def thinned(ink: np.ndarray) -> np.ndarray:
    """One digit's ink with strokes over BOLD_STROKE of its size worn down to about THIN_STROKE (a grey erosion, soft edges
    kept). Why: a pen is as wide whatever is drawn with it, so two digits written side by side on the page's canvas are
    each half the size of one and their strokes twice as wide beside them; scaled up to a digit's box they are bolder
    than any digit the network was trained on: it read 67% of such pairs right, against 87.5% drawn with a pen 0.6 as wide
    and 87.25% worn down (BENCHMARKS.md's notes).
    Worn down on a copy cropped to the digit and at most THIN_SIDE px, so the erosion stays small on a large photo."""
    crop = ink_box(ink, INK_THRESHOLD)
    if crop is None or min(crop.shape) < 2:
        return ink
    if (scale := THIN_SIDE / max(crop.shape)) < 1:
        crop = resize_bilinear(crop, max(1, round(crop.shape[0] * scale)), max(1, round(crop.shape[1] * scale)))
    solid = (crop > 0.5).astype(np.uint8)
    width = stroke_width(solid)
    if width <= BOLD_STROKE * max(crop.shape):
        return crop
    r = round((width - THIN_STROKE * max(crop.shape)) / 2)
    return cv2.erode(crop, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * r + 1, 2 * r + 1))) if r >= 1 else crop


def fit_pair(ink: np.ndarray, size: int, box: int, digit_box: int) -> np.ndarray:
    """Two digits' ink -> float32 [size,size] as MultiMNIST's pairs are made. Drawn over each other: the ink's longer
    side scaled to `box`, centred by mass. Written side by side (`side_by_side`): each digit fit to `digit_box` and
    centred by mass as MNIST's are (its strokes `thinned` if bold), then laid over the other, each moved SIDE_SHIFT px
    back towards where it was written: MultiMNIST lays two MNIST digits over each other, up to 4 px from the centre each,
    which is what the network reads."""
    parts = side_by_side(ink)
    if parts is None:
        return fit_and_centre(ink, size, box)
    first, second, axis = parts
    a = _shifted(fit_and_centre(thinned(first), size, digit_box), -SIDE_SHIFT, axis)
    b = _shifted(fit_and_centre(thinned(second), size, digit_box), SIDE_SHIFT, axis)
    return np.minimum(a + b, 1.0)


def drawing_to_mnist(alpha: np.ndarray, size: int = 28, box: int = 20, digit_box: int | None = None) -> np.ndarray:
    """A drawing's alpha [H,W] in [0,1], or 8-bit as decoded (the ink: strokes opaque on a transparent ground) -> float32
    [size,size] as MNIST (`digit_box` given: as a MultiMNIST pair, `fit_pair`).

    Nothing to find: a canvas has no paper, light or specks to tell from the digit, so what was drawn is the digit (a
    stray dot too, as the page's preview of the network's input shows). A fifth of a photo's cost (BENCHMARKS.md). An
    8-bit alpha becomes floats within the ink's box only, the crop fit_and_centre starts from: a digit drawn on the
    page's canvas covers a fraction of it, and the values are the same."""
    if alpha.dtype == np.uint8:
        if digit_box is None and max(alpha.shape) <= WORK_SIDE:  # no shrink to come, which would average across the box
            alpha = ink_box(alpha, int(INK_THRESHOLD * 255.0))  # a byte above 25 is one above 0.1 once divided by 255
            if alpha is None:
                return np.zeros((size, size), dtype=np.float32)
        alpha = np.divide(alpha, np.float32(255.0), dtype=np.float32)
    a = shrink(np.fmax(np.minimum(np.asarray(alpha, dtype=np.float32), 1.0), 0.0), WORK_SIDE)
    return fit_and_centre(a, size, box) if digit_box is None else fit_pair(a, size, box, digit_box)


def is_drawing(pixels: np.ndarray, alpha: np.ndarray) -> bool:
    """Ink of one colour on a transparent ground, as a canvas exports a drawing (the page's, a paint program's): all the
    picture holds is its alpha. There is no paper, light or speck to tell from the digit, so the search of a photo has
    nothing to find in it and costs a drawing most of its preprocessing (BENCHMARKS.md, front). A cut-out photo or a
    coloured logo holds colours beside its alpha and is searched as any picture. Values in [0,1], or 8-bit (uint8) as
    an upload is decoded, judged alike."""
    top = np.float32(255.0 if alpha.dtype == np.uint8 else 1.0)
    if np.count_nonzero(alpha == 0) < DRAWING_GROUND * alpha.size:
        return False
    # the colours on every other row and column: a photo's grain or a second colour shows there as well, for a quarter
    # of the gather (0.27 ms on a 280x280 canvas); and only the opaque ones become floats
    opaque = alpha[::2, ::2] >= 0.5 * top
    if not opaque.any():
        return not alpha.any()  # a blank canvas; faint marks alone are judged as any picture's
    sample = pixels[::2, ::2][opaque] / top  # [k] grey or [k,3] colour
    ink = sample if pixels.ndim == 2 else to_grey(sample[None])[0]
    return float(ink.max() - ink.min()) <= DRAWING_TOLERANCE


def to_mnist(
    pixels: np.ndarray, alpha: np.ndarray | None = None, size: int = 28, box: int = 20, digit_box: int | None = None
) -> np.ndarray:
    """Any picture of a digit, values in [0,1] ([H,W] grey or [H,W,3] colour, optional alpha [H,W]),
    -> float32 [size,size], background 0 and ink up to 1, as MNIST; all zeros when no digit is found. A drawing (ink of
    one colour on a transparent ground) is read as the page reads its own canvas: its alpha, fit and centred."""
    pixels = np.asarray(pixels, dtype=np.float32)
    alpha = None if alpha is None else np.asarray(alpha, dtype=np.float32)
    if alpha is not None and is_drawing(pixels, alpha):
        return drawing_to_mnist(alpha, size, box, digit_box)
    return picture_to_mnist(pixels, alpha, size, box, digit_box)


def picture_to_mnist(
    pixels: np.ndarray, alpha: np.ndarray | None, size: int = 28, box: int = 20, digit_box: int | None = None
) -> np.ndarray:
    """to_mnist for a picture known not to be a drawing (float32 values as to_mnist takes them): the digit searched for
    and fit, for a caller that has told drawings apart already."""
    # grey first: luma is a weighted mean of the channels, so compositing after it gives the same grey image for a third
    # of the work (a 280x280 canvas export: 1.2 ms less, BENCHMARKS.md's notes)
    x = np.fmax(np.minimum(to_grey(pixels), 1.0), 0.0)  # into [0,1]; NaN -> 0 (minimum keeps a NaN, fmax drops it)
    if alpha is not None:
        x = flatten_alpha(x, np.nan_to_num(alpha, nan=1.0))
    if digit_box is None:
        return fit_and_centre(find_digit(shrink(x, WORK_SIDE)), size, box)
    return fit_pair(find_digit(shrink(x, WORK_SIDE), digits=2), size, box, digit_box)
