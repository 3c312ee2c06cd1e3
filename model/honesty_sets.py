"""Sets of images as people upload them, on which the service's `is_digit` and `blank` answers must be honest.

Why: the rule in the model card was calibrated on MNIST alone, so its thresholds say how MNIST digits look to the
network and nothing about what is not a digit. People send letters typed in any font, blank sheets photographed under
a lamp, scribbles, and real digits in forms MNIST never had (printed and photographed, tightly cropped, low-resolution
scans blown up). Each set here is one such kind, made deterministically from fixed seeds, so a figure measured on it is
the same on every run and machine (given the same fonts, Pillow and OpenCV).

Two splits give different instances of every set: `calibration`, for choosing a rule, and `held_out`, for measuring
it. They differ in seeds, in MNIST's half (the training digits for calibration, the test digits for held out), and for
typed glyphs in the fonts themselves: a font family belongs to one split only, so a rule tuned on calibration glyphs
is measured on typefaces it has not seen.

Every generator returns (images, labels): uint8 greyscale arrays [H, W] of any size, as an upload is before the
service's preprocessing, and the true digits (uint8) for digit sets, None otherwise. Image i of a set depends only on
its set, its split and i, so a longer set begins with the shorter one.

This module never imports the service: the rule lives there, and these sets must stay a fixed yardstick for it.
"""

from __future__ import annotations

import io
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import NamedTuple

import cv2
import numpy as np
from PIL import Image, ImageDraw, ImageFont

from model import MNIST_DIR
from model.idx import load_mnist

# The Debian packages the glyph sets' fonts come from: requirements/fonts.txt, which CI installs.
FONT_PACKAGES: tuple[str, ...] = tuple(
    line.strip()
    for line in (Path(__file__).resolve().parent.parent / "requirements" / "fonts.txt").read_text().splitlines()
    if line.strip() and not line.startswith("#")
)
FONT_ROOT = Path("/usr/share/fonts")
SPLITS = ("calibration", "held_out")

# Glyphs no reader would take for a digit. Left out, each for the digit it can pass for: O o D Q (0); I l i j J | ! / \
# ( ) [ ] (1); Z z (2); S s $ (5); B (8 or 13); b G (6); g q a-like d (9; d is a turned p); L and ^ (a turned 7); dots
# and dashes (. , : ; - _ ' "), which alone on a page are a speck or a bar. Kept, though the network may read them as
# digits, because no person would: U (an open 0), T (its stem is central, a 7's is not), A H y (a 4's strokes), X (8).
UPPER = "ACEFHKMNPRTUVWXY"
LOWER = "acefhkmnprtuvwxy"
SYMBOLS = "#%&@*+=?~"
GLYPHS = UPPER + LOWER + SYMBOLS

# The families whose glyphs are held out: one design or two of each style (sans, serif, monospaced, handwriting,
# script), whole, with every clone of it. Metric clones share their outlines (Arimo, Liberation Sans, Nimbus Sans and
# FreeSans are all Helvetica; Tinos, Liberation Serif, Nimbus Roman and FreeSerif all Times; Nimbus Mono PS and FreeMono
# both Courier), so a clone on the other side would leak the same letters into calibration. Every other family,
# including any from packages beyond FONT_PACKAGES, calibrates.
HELD_OUT_FAMILIES = (
    "Lato",
    "DejaVu Sans",
    "DejaVu Sans Mono",
    "P052",
    "URW Bookman",
    "Nimbus Mono PS",
    "FreeMono",
    "Humor Sans",
    "Because We Build",
    "Because We Learn",
    "Z003",
)

# Fonts whose letters' code points hold other drawings (URW's Dingbats and Standard Symbols map A to a star and to
# Alpha): their glyphs are not the letters GLYPHS names, so they are left out by family.
SYMBOL_FAMILIES = ("D050000L", "Standard Symbols PS", "Dingbats", "Symbol")

Images = tuple[list[np.ndarray], np.ndarray | None]


class FontsMissing(RuntimeError):
    """No usable font file for a split: the glyph sets need the FONT_PACKAGES installed."""


# ---------------------------------------------------------------------------------------------------------------------
# determinism


def _check(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; use one of {SPLITS}")


def _seed(name: str, split: str) -> int:
    _check(split)
    return zlib.crc32(f"{name}/{split}".encode())


def _rngs(name: str, split: str, n: int) -> list[np.random.Generator]:
    """One generator per image, seeded by (set, split, index): image i never depends on how many come after it."""
    seed = _seed(name, split)
    return [np.random.default_rng([seed, i]) for i in range(n)]


# ---------------------------------------------------------------------------------------------------------------------
# paper, light and camera


def _canvas(rng: np.random.Generator, small: bool) -> tuple[int, int]:
    """(height, width) of an upload: `small` for exports and scans (28 px to 400 px), else a photo's (240 px to 1067 px)."""
    if small:
        side = int(rng.choice([28, 32, 48, 64, 96, 128, 160, 200, 280, 400]))
        aspect = float(rng.choice([1.0, 1.0, 1.0, 4 / 3, 3 / 4]))
        return max(16, round(side * min(1.0, aspect))), max(16, round(side * min(1.0, 1 / aspect)))
    short = int(rng.integers(240, 601))
    long = round(short * float(rng.choice([1.0, 4 / 3, 3 / 2, 16 / 9])))
    return (short, long) if rng.random() < 0.5 else (long, short)


def _place(rng: np.random.Generator, shape: tuple[int, int], patch: np.ndarray) -> np.ndarray:
    """The patch (ink in [0, 1]) somewhere wholly inside a canvas of `shape`, never centred on purpose."""
    h, w = shape
    ph, pw = patch.shape
    if ph > h or pw > w:
        s = min(h / ph, w / pw)
        patch = cv2.resize(patch, (max(1, int(pw * s)), max(1, int(ph * s))), interpolation=cv2.INTER_AREA)
        ph, pw = patch.shape
    y, x = int(rng.integers(0, h - ph + 1)), int(rng.integers(0, w - pw + 1))
    out = np.zeros((h, w), np.float32)
    out[y : y + ph, x : x + pw] = patch
    return out


def _jpeg(img: np.ndarray, quality: int) -> np.ndarray:
    buf = io.BytesIO()
    Image.fromarray(img, "L").save(buf, "JPEG", quality=quality)
    return np.asarray(Image.open(io.BytesIO(buf.getvalue())).convert("L"))


def _to_uint8(img: np.ndarray) -> np.ndarray:
    return np.clip(img + 0.5, 0, 255).astype(np.uint8)


def clean(ink: np.ndarray, rng: np.random.Generator, dark_ink: bool) -> np.ndarray:
    """Ink [H, W] in [0, 1] as an export or a clean scan: one paper level (often exactly white or black), one ink level."""
    exact = rng.random() < 0.5
    if dark_ink:
        paper = 255.0 if exact else float(rng.uniform(215, 255))
        pen = 0.0 if exact else float(rng.uniform(0, 80))
    else:
        paper = 0.0 if exact else float(rng.uniform(0, 45))
        pen = 255.0 if exact else float(rng.uniform(180, 255))
    return _to_uint8(paper + (pen - paper) * ink)


def _slope(rng: np.random.Generator, h: int, w: int, levels: float) -> np.ndarray:
    """A lamp to one side: a ramp of `levels` grey levels from one corner of the sheet to the other, in any direction."""
    a = rng.uniform(0, 2 * np.pi)
    ys = np.linspace(0, np.sin(a), h, dtype=np.float32)[:, None]
    xs = np.linspace(0, np.cos(a), w, dtype=np.float32)[None, :]
    ramp = ys + xs
    low, high = float(ramp.min()), float(ramp.max())
    return levels * ((ramp - low) / max(high - low, 1e-6) - 0.5)


def _shadow(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    """A soft shadow (the phone, a hand) over part of the sheet: 1 where it is fully in shadow, 0 where it is not. Drawn
    on a copy at most 64 px long, where its wide blur is cheap, and enlarged: a shadow has no fine detail."""
    s = min(1.0, 64 / max(h, w))
    sh, sw = max(2, round(h * s)), max(2, round(w * s))
    mask = np.zeros((sh, sw), np.float32)
    if rng.random() < 0.5:
        centre = (int(rng.integers(0, sw)), int(rng.integers(0, sh)))
        axes = (int(rng.integers(sw // 6 + 1, sw // 2 + 2)), int(rng.integers(sh // 6 + 1, sh // 2 + 2)))
        cv2.ellipse(mask, centre, axes, float(rng.uniform(0, 180)), 0, 360, 1.0, -1)
    else:  # coming in from one edge
        pts = rng.uniform(0, 1, (4, 2)) * [sw, sh]
        side = int(rng.integers(4))
        pts[:2, side % 2] = 0 if side < 2 else (sw, sh)[side % 2]
        cv2.fillPoly(mask, [pts.astype(np.int32)], 1.0)
    mask = cv2.GaussianBlur(mask, (0, 0), float(rng.uniform(0.02, 0.08)) * max(sh, sw))
    return cv2.resize(mask, (w, h), interpolation=cv2.INTER_LINEAR)


@dataclass(frozen=True)
class Camera:
    """How a photo departs from the sheet. `slope`: grey levels the light changes by across the sheet; `shadow`: how
    much darker a shadow makes the paper (a fraction, 0 none); `blur`: Gaussian sigma in px; `noise`: sensor noise
    sigma in grey levels; `jpeg`: the JPEG quality, 0 for a lossless file."""

    slope: float
    shadow: float
    blur: float
    noise: float
    jpeg: int

    @staticmethod
    def draw(rng: np.random.Generator, max_slope: float = 40.0, max_noise: float = 8.0) -> Camera:
        return Camera(
            slope=float(rng.uniform(0, max_slope)),
            shadow=float(rng.uniform(0.1, 0.3)) if rng.random() < 0.35 else 0.0,
            blur=float(rng.uniform(0.3, 1.5)) if rng.random() < 0.5 else 0.0,
            noise=float(rng.uniform(1.0, max_noise)),
            jpeg=int(rng.integers(50, 96)) if rng.random() < 0.7 else 0,
        )


def photograph(ink: np.ndarray, rng: np.random.Generator, dark_ink: bool, camera: Camera | None = None) -> np.ndarray:
    """Ink [H, W] in [0, 1] on a sheet as a phone sees it: paper not quite white (a blackboard or a screen when the ink
    is light), ink that absorbs only part of the light, a lighting slope, sometimes a shadow and blur, sensor noise and
    usually JPEG. Digits, glyphs, scribbles and blank sheets all go through this one camera, so the sets differ only in
    what is on the sheet."""
    cam = camera or Camera.draw(rng)
    h, w = ink.shape
    if dark_ink:
        paper = float(rng.uniform(150, 235))
        img = paper * (1 - float(rng.uniform(0.45, 0.9)) * ink)
    else:
        paper = float(rng.uniform(20, 80))
        img = paper + (float(rng.uniform(150, 245)) - paper) * ink
    img = img + _slope(rng, h, w, cam.slope)
    if cam.shadow:
        img = img * (1 - cam.shadow * _shadow(rng, h, w))
    if cam.blur:
        img = cv2.GaussianBlur(img.astype(np.float32), (0, 0), cam.blur)
    img = img + rng.normal(0, cam.noise, (h, w)).astype(np.float32)
    out = _to_uint8(img)
    return _jpeg(out, cam.jpeg) if cam.jpeg else out


# ---------------------------------------------------------------------------------------------------------------------
# fonts


def font_files(root: Path = FONT_ROOT) -> list[Path]:
    """Every TrueType and OpenType file under `root`, sorted, links resolved and deduplicated."""
    if not root.is_dir():
        return []
    found = {p.resolve() for p in root.rglob("*") if p.suffix.lower() in (".ttf", ".otf") and p.is_file()}
    return sorted(found)


@cache
def _family(path: Path) -> str:
    return ImageFont.truetype(str(path), 32).getname()[0] or path.stem


def font_split(path: Path) -> str:
    """The split a font belongs to, by its family: HELD_OUT_FAMILIES are held out, every other family calibrates."""
    return "held_out" if _family(path) in HELD_OUT_FAMILIES else "calibration"


@cache
def _font(path: Path, px: int) -> ImageFont.FreeTypeFont:
    return ImageFont.truetype(str(path), px, layout_engine=ImageFont.Layout.BASIC)


def _bitmap(font: ImageFont.FreeTypeFont, ch: str) -> bytes:
    left, top, right, bottom = font.getbbox(ch)
    if right <= left or bottom <= top:
        return b""
    im = Image.new("L", (right - left, bottom - top), 0)
    ImageDraw.Draw(im).text((-left, -top), ch, font=font, fill=255)
    return im.tobytes() if im.getbbox() else b""


@cache
def _drawable(path: Path) -> str:
    """The glyphs of GLYPHS this font really has: one missing from it would come out as its placeholder box, or empty."""
    font = _font(path, 48)
    missing = _bitmap(font, "\U0010fffd")
    return "".join(ch for ch in GLYPHS if (b := _bitmap(font, ch)) and b != missing)


def fonts_for(split: str, root: Path = FONT_ROOT) -> list[Path]:
    """The split's font files that draw letters (not SYMBOL_FAMILIES) and at least half of GLYPHS."""
    _check(split)
    return [
        p
        for p in font_files(root)
        if font_split(p) == split and _family(p) not in SYMBOL_FAMILIES and len(_drawable(p)) >= len(GLYPHS) // 2
    ]


def render_glyph(path: Path, ch: str, height: int, stroke: float, max_width: int) -> np.ndarray:
    """One glyph as ink in [0, 1], cropped to itself: its ink `height` px tall (less if it would be wider than
    `max_width`), its strokes thickened by `stroke` of the font size on each side (0: as designed)."""
    ref = _font(path, 100)
    left, top, right, bottom = ref.getbbox(ch)
    scale = min(height / max(bottom - top, 1), max_width / max(right - left, 1))
    px = max(6, round(100 * scale))
    font = _font(path, px)
    sw = round(stroke * px)
    left, top, right, bottom = font.getbbox(ch, stroke_width=sw)
    im = Image.new("L", (right - left + 4, bottom - top + 4), 0)
    ImageDraw.Draw(im).text((2 - left, 2 - top), ch, font=font, fill=255, stroke_width=sw, stroke_fill=255)
    ink = np.asarray(im, np.float32) / 255.0
    rows, cols = np.flatnonzero(ink.max(1) > 0), np.flatnonzero(ink.max(0) > 0)
    if not rows.size:
        return ink
    return ink[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1]


def glyphs(split: str, n: int, photographed: bool, fonts: Sequence[Path] | None = None) -> Images:
    """Letters and symbols that look like no digit (GLYPHS), typed in the split's fonts: image i takes font i mod the
    number of fonts, so every font file is used as evenly as `n` allows; sizes, stroke thickening, polarity (dark on
    light in three of four) and placement are drawn. `photographed`: the phone camera (photograph); else a clean
    export or scan, from 28x28 up."""
    fonts = list(fonts) if fonts is not None else fonts_for(split)
    if not fonts:
        raise FontsMissing(f"no font for split {split!r} under {FONT_ROOT}: install {' '.join(FONT_PACKAGES)}")
    images = []
    name = "glyphs_photo" if photographed else "glyphs_clean"
    for i, rng in enumerate(_rngs(name, split, n)):
        path = fonts[i % len(fonts)]
        chars = _drawable(path)
        ch = chars[int(rng.integers(len(chars)))]
        h, w = _canvas(rng, small=not photographed)
        share = rng.uniform(0.15, 0.6) if photographed else rng.uniform(0.35, 0.9)
        stroke = float(rng.choice([0.0, 0.0, 0.0, 0.02, 0.04]))  # more fills a black face's counters: a blob, no letter
        ink = _place(rng, (h, w), render_glyph(path, ch, max(6, round(share * min(h, w))), stroke, max(6, round(0.95 * w))))
        dark = rng.random() < 0.75
        images.append(photograph(ink, rng, dark) if photographed else clean(ink, rng, dark))
    return images, None


# ---------------------------------------------------------------------------------------------------------------------
# blank sheets and scribbles


def blank(split: str, n: int, jpeg: bool) -> Images:
    """Nothing on the sheet: light paper (dark ground in one of five) photographed with a lighting slope of up to 40 grey
    levels across it, a shadow on a third, sensor noise of sigma up to 8; lossless or JPEG (quality 50-95). Sizes from
    28x28 thumbnails to photos, since the service treats small images differently."""
    images = []
    for rng in _rngs("blank_jpeg" if jpeg else "blank", split, n):
        h, w = _canvas(rng, small=rng.random() < 0.4)
        cam = Camera.draw(rng)
        cam = Camera(cam.slope, cam.shadow, cam.blur, cam.noise, int(rng.integers(50, 96)) if jpeg else 0)
        images.append(photograph(np.zeros((h, w), np.float32), rng, rng.random() < 0.8, cam))
    return images, None


def _scribble_path(rng: np.random.Generator) -> list[np.ndarray]:
    """Polylines in the unit square that are no digit: a tangle through many random points, a zigzag, hatching (crossed
    or not), a spiral of two or more turns, or a ball of overlapping loops."""
    kind = int(rng.integers(5))
    if kind == 0:  # tangle: a smooth curve through 7-12 random points
        pts = rng.uniform(0.05, 0.95, (int(rng.integers(7, 13)), 2))
        t = np.linspace(0, 1, len(pts))
        fine = np.linspace(0, 1, 40 * len(pts))
        return [np.stack([np.interp(fine, t, pts[:, 0]), np.interp(fine, t, pts[:, 1])], 1)]
    if kind == 1:  # zigzag of 6-12 sharp turns, along any direction
        k = int(rng.integers(6, 13))
        along = np.linspace(0.05, 0.95, k)
        across = np.where(np.arange(k) % 2 == 0, 0.1, 0.9) + rng.uniform(-0.08, 0.08, k)
        pts = np.stack([along, across], 1) if rng.random() < 0.5 else np.stack([across, along], 1)
        return [pts]
    if kind == 2:  # hatching: 4-9 parallel strokes, crossed by a second set half the time
        lines = []
        for angle in [rng.uniform(0, np.pi)] + ([rng.uniform(0, np.pi)] if rng.random() < 0.5 else []):
            d = np.array([np.cos(angle), np.sin(angle)])
            normal = np.array([-d[1], d[0]])
            for offset in np.linspace(-0.35, 0.35, int(rng.integers(4, 10))):
                c = 0.5 + offset * normal
                lines.append(np.stack([c - 0.45 * d, c + 0.45 * d]))
        return lines
    if kind == 3:  # spiral of 2-4 turns
        turns = rng.uniform(2, 4)
        t = np.linspace(0, 1, 400)
        r = 0.05 + 0.4 * t
        a = 2 * np.pi * turns * t + rng.uniform(0, 2 * np.pi)
        return [np.stack([0.5 + r * np.cos(a), 0.5 + r * np.sin(a)], 1)]
    loops = []  # a ball of 4-8 overlapping ellipses, drawn as one stroke
    for _ in range(int(rng.integers(4, 9))):
        c, ax = rng.uniform(0.3, 0.7, 2), rng.uniform(0.15, 0.4, 2)
        a = np.linspace(0, 2 * np.pi, 120) + rng.uniform(0, 2 * np.pi)
        loops.append(np.stack([c[0] + ax[0] * np.cos(a), c[1] + ax[1] * np.sin(a)], 1))
    return [np.concatenate(loops)]


def draw_scribble(rng: np.random.Generator, side: int) -> np.ndarray:
    """A scribble as ink in [0, 1] on a side x side square, drawn four times larger and reduced (anti-aliased)."""
    big = 4 * side
    canvas = np.zeros((big, big), np.uint8)
    thickness = max(1, round(float(rng.uniform(0.01, 0.06)) * big))
    squash = rng.uniform(0.6, 1.0, 2)
    for line in _scribble_path(rng):
        pts = (0.5 + (line - 0.5) * squash) * (big - 1)
        cv2.polylines(canvas, [np.round(pts * 16).astype(np.int32)], False, 255, thickness, cv2.LINE_AA, 4)
    return cv2.resize(canvas, (side, side), interpolation=cv2.INTER_AREA).astype(np.float32) / 255.0


def scribbles(split: str, n: int) -> Images:
    """Random strokes that are no digit (_scribble_path), half clean, half photographed, in either polarity."""
    images = []
    for rng in _rngs("scribbles", split, n):
        photo = rng.random() < 0.5
        h, w = _canvas(rng, small=not photo)
        side = max(8, round(min(h, w) * (rng.uniform(0.2, 0.6) if photo else rng.uniform(0.4, 0.9))))
        ink = _place(rng, (h, w), draw_scribble(rng, side))
        dark = rng.random() < 0.75
        images.append(photograph(ink, rng, dark) if photo else clean(ink, rng, dark))
    return images, None


# ---------------------------------------------------------------------------------------------------------------------
# real digits


@cache
def _mnist(directory: str, half: str) -> tuple[np.ndarray, np.ndarray]:
    return load_mnist(directory, half)


def _digits(split: str, name: str, n: int, mnist_dir: str | Path) -> tuple[np.ndarray, np.ndarray, list[np.random.Generator]]:
    """n MNIST digits for a set: from the training half for calibration, the test half for held out, drawn by the set's seed."""
    x, y = _mnist(str(mnist_dir), "train" if split == "calibration" else "test")
    pick = np.random.default_rng(_seed(name, split)).permutation(len(x))[:n]
    return x[pick], y[pick], _rngs(name, split, len(pick))


def _crop(digit: np.ndarray, margin: int = 0) -> np.ndarray:
    """The digit [28, 28] cut to its own ink plus `margin` px of ground."""
    rows, cols = np.flatnonzero(digit.max(1) > 0), np.flatnonzero(digit.max(0) > 0)
    if not rows.size:
        return digit
    h, w = digit.shape
    return digit[max(0, rows[0] - margin) : min(h, rows[-1] + 1 + margin), max(0, cols[0] - margin) : min(w, cols[-1] + 1 + margin)]


_UPSCALE = (cv2.INTER_NEAREST, cv2.INTER_LINEAR, cv2.INTER_CUBIC)


def mnist(split: str, n: int, mnist_dir: str | Path = MNIST_DIR) -> Images:
    """MNIST digits as they are: 28x28, light on black, the network's own world (the yardstick for the others)."""
    x, y, _ = _digits(split, "mnist", n, mnist_dir)
    return [np.ascontiguousarray(d) for d in x], y.copy()


def mnist_photo(split: str, n: int, mnist_dir: str | Path = MNIST_DIR) -> Images:
    """MNIST digits printed on paper and photographed: dark on light (light on dark in one of five), the digit a sixth to
    half of the frame's short side, through the phone camera (photograph)."""
    x, y, rngs = _digits(split, "mnist_photo", n, mnist_dir)
    images = []
    for d, rng in zip(x, rngs):
        h, w = _canvas(rng, small=False)
        side = max(12, round(min(h, w) * rng.uniform(0.2, 0.6)))
        ink = cv2.resize(d.astype(np.float32) / 255.0, (side, side), interpolation=int(rng.choice(_UPSCALE[1:])))
        images.append(photograph(_place(rng, (h, w), np.clip(ink, 0, 1)), rng, rng.random() < 0.8))
    return images, y.copy()


def mnist_tight(split: str, n: int, mnist_dir: str | Path = MNIST_DIR) -> Images:
    """MNIST digits cropped to their own ink (0-2 px of ground left), scaled x1 to x8, either polarity; clean, or with
    light noise and JPEG as a cropped photo has."""
    x, y, rngs = _digits(split, "mnist_tight", n, mnist_dir)
    images = []
    for d, rng in zip(x, rngs):
        crop = _crop(d, int(rng.integers(0, 3))).astype(np.float32) / 255.0
        f = float(rng.uniform(1, 8))
        ink = cv2.resize(
            crop, (max(1, round(crop.shape[1] * f)), max(1, round(crop.shape[0] * f))), interpolation=int(rng.choice(_UPSCALE))
        )
        ink = np.clip(ink, 0, 1)
        dark = rng.random() < 0.5
        if rng.random() < 0.5:
            images.append(clean(ink, rng, dark))
        else:
            cam = Camera(
                slope=float(rng.uniform(0, 15)), shadow=0.0, blur=0.0, noise=float(rng.uniform(1, 5)), jpeg=int(rng.integers(60, 96))
            )
            images.append(photograph(ink, rng, dark, cam))
    return images, y.copy()


def low_resolution(digit: np.ndarray, side: int, rng: np.random.Generator) -> np.ndarray:
    """A digit [28, 28] as a low-resolution capture of `side` x `side` in [0, 1]: as UCI's optdigits were made, the digit
    fills a bitmap four times that size (binarised in half the cases), which is then counted in 4x4 blocks; quantised to
    17 levels (0-16, optdigits' range) in half the cases. A margin of 0 or 1 px is left around it."""
    crop = _crop(digit).astype(np.float32) / 255.0
    big = 4 * side
    box = big - 8 * int(rng.integers(0, 2))
    s = box / max(crop.shape)
    patch = cv2.resize(crop, (max(1, round(crop.shape[1] * s)), max(1, round(crop.shape[0] * s))), interpolation=cv2.INTER_AREA)
    if rng.random() < 0.5:
        patch = (patch >= 0.5).astype(np.float32)
    bitmap = np.zeros((big, big), np.float32)
    ph, pw = patch.shape
    y0, x0 = (big - ph) // 2, (big - pw) // 2
    bitmap[y0 : y0 + ph, x0 : x0 + pw] = patch
    small = bitmap.reshape(side, 4, side, 4).mean((1, 3))
    return np.round(small * 16) / 16 if rng.random() < 0.5 else small


def _lowres_set(name: str, split: str, n: int, sides: tuple[int, int], mnist_dir: str | Path) -> Images:
    x, y, rngs = _digits(split, name, n, mnist_dir)
    images = []
    for d, rng in zip(x, rngs):
        small = low_resolution(d, int(rng.integers(sides[0], sides[1] + 1)), rng)
        up = int(rng.integers(84, 113))
        how = cv2.INTER_NEAREST if rng.random() < 0.5 else int(rng.choice(_UPSCALE[1:]))
        big = np.clip(cv2.resize(small, (up, up), interpolation=how), 0, 1)
        images.append(clean(big, rng, rng.random() < 0.5))
    return images, y.copy()


def mnist_8x8(split: str, n: int, mnist_dir: str | Path = MNIST_DIR) -> Images:
    """Low-resolution handwriting as people report it: 8x8 captures (low_resolution) uploaded blown up to 84-112 px,
    by nearest-neighbour (as an image viewer shows them) or smooth scaling, either polarity."""
    return _lowres_set("mnist_8x8", split, n, (8, 8), mnist_dir)


def mnist_lowres(split: str, n: int, mnist_dir: str | Path = MNIST_DIR) -> Images:
    """As mnist_8x8, from captures of 9x9 to 14x14."""
    return _lowres_set("mnist_lowres", split, n, (9, 14), mnist_dir)


# ---------------------------------------------------------------------------------------------------------------------
# the catalogue


class SetSpec(NamedTuple):
    """A set: `kind` is what an honest answer calls its images ("digit", "non_digit" or "blank"); `n` its usual size;
    `make(split, n, mnist_dir)` the images (only digit sets read MNIST)."""

    kind: str
    n: int
    make: Callable[[str, int, str | Path], Images]


SETS: dict[str, SetSpec] = {
    "glyphs_clean": SetSpec("non_digit", 1500, lambda split, n, _: glyphs(split, n, photographed=False)),
    "glyphs_photo": SetSpec("non_digit", 1500, lambda split, n, _: glyphs(split, n, photographed=True)),
    "scribbles": SetSpec("non_digit", 800, lambda split, n, _: scribbles(split, n)),
    "blank": SetSpec("blank", 500, lambda split, n, _: blank(split, n, jpeg=False)),
    "blank_jpeg": SetSpec("blank", 500, lambda split, n, _: blank(split, n, jpeg=True)),
    "mnist": SetSpec("digit", 1000, mnist),
    "mnist_photo": SetSpec("digit", 800, mnist_photo),
    "mnist_tight": SetSpec("digit", 800, mnist_tight),
    "mnist_8x8": SetSpec("digit", 800, mnist_8x8),
    "mnist_lowres": SetSpec("digit", 800, mnist_lowres),
}


def make_set(name: str, split: str, n: int | None = None, mnist_dir: str | Path = MNIST_DIR) -> Images:
    """The set `name` of SETS for `split`, its usual size unless `n` is given."""
    spec = SETS[name]
    return spec.make(split, spec.n if n is None else n, mnist_dir)


if __name__ == "__main__":
    import sys

    sys.stdout.write(" ".join(FONT_PACKAGES) + "\n")
