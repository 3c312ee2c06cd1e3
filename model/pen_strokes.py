"""MNIST digits as a person with a pen would draw them: the strokes traced from each digit's skeleton, as polylines in
fractions of a canvas: for the page's tests to draw with the mouse, for the two-digit rule's canvas set to render, and
for the two-digit network to train on what the page's canvas sends (`pen_digits`).

A digit is thinned to a one-pixel skeleton (Zhang and Suen's thinning, 1984) at twice MNIST's resolution, and the
skeleton is walked into strokes: each starts at an end (a pixel with one neighbour) while there is one, else anywhere,
and follows unvisited neighbours, straight on where it can. Short spurs of a few pixels are dropped, as the pen would not
have made them. A skeleton loses what is not a line: a loop that MNIST's ink filled thins to a stub, a short bar to a spur,
so ink that the strokes leave uncovered gets its outline drawn as well, as a person draws the loop and the pen fills it.
Rendering (`render`) draws the strokes with a round pen, as the page's canvas does.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
from pathlib import Path

import cv2
import numpy as np
from PIL import Image, ImageDraw
from tqdm import tqdm

log = logging.getLogger("capsnet.pen_strokes")

Stroke = list[tuple[float, float]]
PAGE_SIDE, PEN = 280, 1 / 14  # the page's two-digit canvas and its round pen, a fraction of the canvas wide
DRAWN_PEN = PEN * 36 / 28  # that pen as a share of a digit's 28 px frame, which spans 28/36 of the two-digit canvas
TRACING = 2  # the tracer's version, kept with redrawn digits: a cache drawn by another is drawn again
NEIGHBOURS = [(-1, 0), (-1, 1), (0, 1), (1, 1), (1, 0), (1, -1), (0, -1), (-1, -1)]  # P2..P9, clockwise from north


def thin(mask: np.ndarray) -> np.ndarray:
    """Zhang-Suen thinning of a boolean image: a skeleton one pixel wide that keeps the shape's connectivity. Each pass
    peels only boundary pixels, so it ends within half the stroke width's passes."""
    img = np.pad(mask.astype(np.uint8), 1)
    while True:
        changed = False
        for step in (0, 1):
            p = [np.roll(np.roll(img, -dy, 0), -dx, 1) for dy, dx in NEIGHBOURS]  # p[k][y, x] = neighbour k of (y, x)
            count = sum(p)
            ring = p + [p[0]]
            transitions = sum(((ring[k] == 0) & (ring[k + 1] == 1)).astype(np.uint8) for k in range(8))
            p2, p4, p6, p8 = p[0], p[2], p[4], p[6]
            first = (p2 * p4 * p6 == 0) & (p4 * p6 * p8 == 0)  # the first sub-pass peels south-east, the second north-west
            side = first if step == 0 else (p2 * p4 * p8 == 0) & (p2 * p6 * p8 == 0)
            peel = (img == 1) & (count >= 2) & (count <= 6) & (transitions == 1) & side
            if peel.any():
                img[peel] = 0
                changed = True
        if not changed:
            return img[1:-1, 1:-1].astype(bool)


def _walk(skeleton: np.ndarray) -> list[list[tuple[int, int]]]:
    left = {(int(y), int(x)) for y, x in zip(*np.nonzero(skeleton))}

    def around(y: int, x: int) -> list[tuple[int, int]]:
        return [(y + dy, x + dx) for dy, dx in NEIGHBOURS if (y + dy, x + dx) in left]

    paths = []
    while left:
        ends = sorted(q for q in left if len(around(*q)) == 1)
        here = ends[0] if ends else min(left)
        path, heading = [here], (0, 0)
        left.discard(here)
        while True:
            nxt = around(*here)
            if not nxt:
                break
            # straight on where it can: the neighbour whose step is nearest the last one
            best = max(nxt, key=lambda q: (q[0] - here[0]) * heading[0] + (q[1] - here[1]) * heading[1])
            heading = (best[0] - here[0], best[1] - here[1])
            here = best
            path.append(here)
            left.discard(here)
        paths.append(path)
    return paths


def _disk(radius: int) -> np.ndarray:
    return cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * radius + 1, 2 * radius + 1))


def _outlines_of_uncovered_ink(
    mask: np.ndarray, paths: list[list[tuple[int, int]]], pen: float, min_area: int = 6
) -> list[list[tuple[int, int]]]:
    """Closed paths (y, x) around the ink that `paths`, drawn as wide as the digit's own strokes, leave uncovered: a
    filled loop or a dropped bar; a patch under `min_area` pixels (at 56 px) is a stroke's rim, not a part of the digit.
    Each outline is set in from the ink's edge by half the pen (`pen` of the 28 px frame wide), so that the pen drawn
    along it keeps to the ink."""
    side = mask.shape[0]
    # padded, so that ink touching the frame's edge is measured from that edge as well
    depth = cv2.distanceTransform(np.pad(mask.astype(np.uint8), 1), cv2.DIST_L2, 5)[1:-1, 1:-1]
    drawn = np.zeros(mask.shape, np.uint8)
    for p in paths:
        ys, xs = np.array(p).T
        drawn[ys, xs] = 1
    if not drawn.any():
        return []  # no strokes (no ink): nothing to measure the digit's own stroke width on
    # The digit's own stroke is the median depth of its centre lines; ink past 1.2 of that from every path is uncovered
    # (a little over 1, since a stroke's width wavers along it).
    reach = int(np.ceil(1.2 * float(np.median(depth[drawn > 0]))))
    uncovered = mask.astype(np.uint8) & (1 - cv2.dilate(drawn, _disk(reach)))
    count, labels, stats, _ = cv2.connectedComponentsWithStats(uncovered, connectivity=8)
    inset = (depth >= pen * side / 2).astype(np.uint8)
    outlines = []
    for k in range(1, count):
        if stats[k, cv2.CC_STAT_AREA] < min_area:
            continue
        part = (labels == k).astype(np.uint8)
        region = inset & cv2.dilate(part, _disk(reach))
        # a patch thinner than the pen has no inset ink: its own outline, a dot or a short loop, which the pen fills
        contours, _ = cv2.findContours(region if region.any() else part, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_NONE)
        outlines += [[(int(y), int(x)) for x, y in c[:, 0]] + [(int(c[0, 0, 1]), int(c[0, 0, 0]))] for c in contours]
    return outlines


def trace(digit: np.ndarray, min_points: int = 4, threshold: float = 0.35, pen: float = DRAWN_PEN) -> list[Stroke]:
    """A 28x28 digit (values in [0,1]) -> its strokes, each a polyline of (x, y) in fractions of the 28x28 frame, for a
    pen `pen` of that frame wide (the outlines of uncovered ink are set in by half of it). The outlines are kept
    whatever their length: a closed outline of one pixel is a dot, which the pen draws as the patch it stands for."""
    big = np.asarray(Image.fromarray(np.asarray(digit, np.float32)).resize((56, 56), Image.Resampling.BILINEAR))
    mask = big > threshold
    paths = _walk(thin(mask))
    long = [p for p in paths if len(p) >= min_points] or paths[:1]
    long += _outlines_of_uncovered_ink(mask, long, pen)
    return [[((x + 0.5) / 56.0, (y + 0.5) / 56.0) for y, x in p[::2] + ([p[-1]] if len(p) % 2 == 0 else [])] for p in long]


def place(strokes: list[Stroke], scale: float, dx: float, dy: float) -> list[Stroke]:
    """Strokes of a 28x28 frame onto a canvas: scaled about its centre by `scale` (28/36 puts a digit on the two-digit
    canvas as MultiMNIST does) and moved by (dx, dy) in fractions of the canvas."""
    return [[(0.5 + (x - 0.5) * scale + dx, 0.5 + (y - 0.5) * scale + dy) for x, y in s] for s in strokes]


def render(strokes: list[Stroke], side: int = 280, pen: float = 1 / 14) -> np.ndarray:
    """The strokes drawn with a round pen `pen` of the canvas wide, as the page draws them: alpha [side, side] in [0,1]."""
    scale = 4  # drawn large and reduced: the soft edges a browser's anti-aliasing gives
    img = Image.new("L", (side * scale, side * scale), 0)
    d = ImageDraw.Draw(img)
    width = max(1, round(pen * side * scale))
    for s in strokes:
        pts = [(x * side * scale, y * side * scale) for x, y in s]
        if len(pts) > 1:
            d.line(pts, fill=255, width=width, joint="curve")
        for x, y in (pts[0], pts[-1]):
            d.ellipse((x - width / 2, y - width / 2, x + width / 2, y + width / 2), fill=255)
    return np.asarray(img.resize((side, side), Image.Resampling.BOX), np.float32) / 255.0


def _pen_chunk(args: tuple[np.ndarray, float]) -> np.ndarray:
    images, pen = args
    return np.stack([render(trace(d / 255.0, pen=pen), 28, pen) for d in images]).astype(np.float32)


def pen_digits(images: np.ndarray, pen: float, cache: Path | None = None, workers: int | None = None) -> np.ndarray:
    """MNIST digits [N,28,28] (0-255) redrawn with a round pen `pen` of their 28 px frame wide, as their traced strokes:
    float32 [N,28,28] in [0,1]. About 2-3 ms a digit on one core, so the digits are drawn by `workers` processes
    (every core by default: a GPU machine's 16 draw the 60,000 training digits in seconds, not minutes of its time) and
    kept in `cache` (an .npz file, the pen and the tracer's version beside them; remade when the count, the pen or the
    tracer differs)."""
    if cache is not None and cache.exists():
        with np.load(cache, allow_pickle=False) as kept:
            same_tracing = "tracing" in kept.files and int(kept["tracing"]) == TRACING
            if same_tracing and kept["digits"].shape[0] == len(images) and float(kept["pen"]) == pen:
                return kept["digits"]
    workers = max(1, min(workers or len(os.sched_getaffinity(0)), len(images) // 64))
    chunks = [(c, pen) for c in np.array_split(images, workers * 8)] if workers > 1 else [(images, pen)]
    bar = tqdm(total=len(images), desc="pen strokes", unit="digit")
    parts = []
    # spawned, not forked: the caller may hold torch's threads, which a fork would copy mid-flight
    with multiprocessing.get_context("spawn").Pool(workers) if workers > 1 else contextlib.nullcontext() as pool:
        for part in (pool.imap if pool is not None else map)(_pen_chunk, chunks):
            parts.append(part)
            bar.update(len(part))
    bar.close()
    drawn = np.concatenate(parts)
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        with cache.open("wb") as f:  # a file object: np.savez would add .npz to a name without it
            np.savez(f, digits=drawn, pen=np.float64(pen), tracing=np.int64(TRACING))
        log.info("%d digits redrawn with the pen by %d processes, kept in %s", len(images), workers, cache)
    return drawn
