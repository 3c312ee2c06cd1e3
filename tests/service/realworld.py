"""Phone photos of handwritten digits, non-digits and blanks, as pure functions of a seeded numpy Generator: accuracies
measured on them are repeatable. They are never easy: a pipeline that only copes with clean, centred, high-contrast images
should score badly on them."""

from __future__ import annotations

import io

import cv2
import numpy as np
from PIL import Image, ImageDraw, ImageFont

NON_DIGIT_KINDS = ("letter", "scribble", "hatching", "noise")
BLANK_KINDS = ("paper", "canvas")
GLYPHS = tuple("AEFHKMNRWXY#@%&*+=?")  # none of them looks like a digit
CANVAS = 280  # what the demo page sends

PAPERS = {"white": (1.0, 1.0, 1.0), "cream": (1.0, 0.96, 0.86), "grey": (0.93, 0.93, 0.94)}
PENS = {"black": (0.10, 0.10, 0.12), "blue": (0.16, 0.24, 0.62), "pencil": (0.36, 0.36, 0.38)}
LINE_COLOURS = ((0.55, 0.72, 0.95), (0.72, 0.74, 0.78))  # light blue or grey ruling


def _frame(rng: np.random.Generator) -> tuple[int, int]:
    """Phones send anything from thumbnails to full 12 MP shots, in either orientation."""
    if rng.random() < 1 / 40:
        h, w = 3024, 4032
    else:
        short = int(rng.integers(300, 1201))
        h, w = short, min(1600, round(short * rng.choice([1.0, 4 / 3, 3 / 2, 16 / 9])))
    return (h, w) if rng.random() < 0.5 else (w, h)


def _grain(a: np.ndarray, rng: np.random.Generator, sigma: float, streak: int = 1) -> None:
    """Adds gaussian grain in place from one 256 px tile: a fresh full-frame draw would cost most of the time budget."""
    tile = rng.standard_normal((256, 256) + a.shape[2:], np.float32)
    tile = cv2.blur(tile, (streak, 1)) * sigma if streak > 1 else tile * sigma
    for y in range(0, a.shape[0], 256):
        for x in range(0, a.shape[1], 256):
            block = a[y : y + 256, x : x + 256]
            block += tile[: block.shape[0], : block.shape[1]]


def _paper(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    """Paper is never pure white in a photo: it has a tint, blotchy texture and fibres that a threshold must ignore."""
    tint = np.array(PAPERS[rng.choice(list(PAPERS))], np.float32) * rng.uniform(0.97, 1.03, 3).astype(np.float32)
    cells = int(rng.integers(10, 40))  # blotches span a few percent of the frame
    blotches = rng.uniform(-1, 1, (max(2, cells * h // max(h, w)), max(2, cells * w // max(h, w)))).astype(np.float32)
    shade = cv2.resize(blotches * rng.uniform(0.004, 0.02), (w, h), interpolation=cv2.INTER_CUBIC)
    shade += 1
    _grain(shade, rng, rng.uniform(0.004, 0.02), int(rng.integers(1, 6)))  # fibres run mostly one way
    img = np.empty((h, w, 3), np.float32)
    img[:] = rng.uniform(0.72, 0.97) * tint / tint.max()
    img *= shade[..., None]
    return img


def _ruled(rng: np.random.Generator, img: np.ndarray) -> None:
    """Exercise books are ruled; the lines are long, straight and fainter and thinner than any pen stroke."""
    h, w = img.shape[:2]
    gap, tilt = rng.uniform(0.04, 0.08) * h, rng.uniform(-0.015, 0.015) * w
    mask = np.zeros((h, w), np.float32)
    for y in np.arange(rng.uniform(0, gap), h + abs(tilt), gap):
        cv2.line(mask, (0, round(y * 16)), ((w - 1) * 16, round((y + tilt) * 16)), 1.0, max(1, h // 700), cv2.LINE_AA, 4)
    colour = np.array(LINE_COLOURS[rng.integers(len(LINE_COLOURS))], np.float32)
    _stain(img, mask, rng.uniform(0.25, 0.5) * (1 - colour))


def _stain(img: np.ndarray, mask: np.ndarray, absorb: np.ndarray, y: int = 0, x: int = 0) -> None:
    """Ink and ruling absorb light per colour channel; only the mask's own region of the frame is touched."""
    region = img[y : y + mask.shape[0], x : x + mask.shape[1]]
    region *= 1 - mask[..., None] * absorb


def _light(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    """A lamp from one side, lens vignetting and the phone's own shadow: brightness is never uniform over the frame."""
    lh, lw = 64 * h // max(h, w) + 2, 64 * w // max(h, w) + 2
    y, x = np.mgrid[0 : 1 : lh * 1j, 0 : 1 : lw * 1j].astype(np.float32)
    a, (cy, cx) = rng.uniform(0, 2 * np.pi), rng.uniform(0.3, 0.7, 2)
    ramp, vignette = np.cos(a) * x + np.sin(a) * y, np.clip(((x - cx) ** 2 + (y - cy) ** 2) / 0.5, 0, 1)
    field = (1 - rng.uniform(0, 0.3) * (ramp - ramp.min()) / np.ptp(ramp)) * (1 - rng.uniform(0, 0.3) * vignette)
    field = 1 - (1 - field) * min(1.0, 0.45 / max(1e-6, 1 - field.min()))  # at most ~45% darker
    if rng.random() < 0.65:
        shade = np.zeros((lh, lw), np.float32)
        if rng.random() < 0.5:
            centre = (int(rng.integers(0, lw)), int(rng.integers(0, lh)))
            axes = (int(rng.integers(lw // 5, lw // 2)), int(rng.integers(lh // 5, lh // 2)))
            cv2.ellipse(shade, centre, axes, float(rng.uniform(0, 180)), 0, 360, 1.0, -1)
        else:  # something held over the page, coming in from an edge
            pts = rng.uniform(0, 1, (4, 2)) * [lw, lh]
            side = rng.integers(4)
            pts[:2, side % 2] = 0 if side < 2 else (lw, lh)[side % 2]
            cv2.fillPoly(shade, [pts.astype(np.int32)], 1.0)
        shade = cv2.GaussianBlur(shade, (0, 0), rng.uniform(1.5, 5))
        field *= 1 - rng.uniform(0.12, 0.35) * shade
    return cv2.resize(field, (w, h), interpolation=cv2.INTER_LINEAR)


def _photo(rng: np.random.Generator, h: int, w: int, ink: tuple[np.ndarray, int, int] | None) -> bytes:
    """The one camera pipeline shared by digits, non-digits and blanks, so they differ only in what is on the paper."""
    size, s = (w, h), 2 if h * w > 4_000_000 else 1  # 12 MP shots come out soft anyway: made at half size, then upscaled
    h, w = h // s, w // s
    if ink is not None and s > 1:
        ink = cv2.resize(ink[0], None, fx=1 / s, fy=1 / s, interpolation=cv2.INTER_AREA), ink[1] // s, ink[2] // s
    img = _paper(rng, h, w)
    if rng.random() < 1 / 3:
        _ruled(rng, img)
    if ink is not None:
        mask, y, x = ink
        pen = rng.choice(list(PENS))
        colour = np.array(PENS[pen], np.float32)
        full = 1 - colour.mean()
        contrast = rng.uniform(0.35, 0.6) if rng.random() < 0.25 else full * rng.uniform(0.85, 1.0)
        if pen == "pencil":  # graphite leaves a grainy, uneven trace
            mask = mask * np.clip(0.75 + 0.3 * cv2.GaussianBlur(rng.standard_normal(mask.shape, np.float32), (0, 0), 0.8), 0.3, 1)
        _stain(img, mask, (contrast / full) * (1 - colour), y, x)
    img *= _light(rng, h, w)[..., None]
    if rng.random() < 0.4:  # slightly out of focus
        cv2.GaussianBlur(img, (0, 0), rng.uniform(0.4, 1.2) * max(h, w) / 1000, dst=img)
    _grain(img, rng, rng.uniform(0.003, 0.04))  # sensor noise
    np.clip(img, 0, 1, out=img)
    img *= 255
    img += 0.5
    out = img.astype(np.uint8)
    im = Image.fromarray(cv2.resize(out, size, interpolation=cv2.INTER_LINEAR) if s > 1 else out, "RGB")
    if rng.random() < 1 / 8 and h * w <= 600_000:  # a PNG now and then; never a large one, noisy PNGs are slow to compress
        return _encode(im, "PNG", compress_level=1)
    return _encode(im, "JPEG", quality=int(rng.integers(60, 96)))


def _encode(im: Image.Image, fmt: str, **options: int) -> bytes:
    buf = io.BytesIO()
    im.save(buf, fmt, **options)
    return buf.getvalue()


def _place(rng: np.random.Generator, h: int, w: int, patch: np.ndarray) -> tuple[np.ndarray, int, int]:
    """Nobody centres the digit in the viewfinder: anywhere goes, as long as it is wholly in the frame."""
    ph, pw = patch.shape
    margin = int(0.03 * min(h, w))
    y = int(rng.integers(margin, max(margin, h - ph - margin) + 1))
    x = int(rng.integers(margin, max(margin, w - pw - margin) + 1))
    return patch[: h - y, : w - x], y, x


def _rotate(rng: np.random.Generator, patch: np.ndarray, degrees: float) -> np.ndarray:
    ph, pw = patch.shape
    m = cv2.getRotationMatrix2D((pw / 2, ph / 2), float(rng.uniform(-degrees, degrees)), 1.0)
    return cv2.warpAffine(patch, m, (pw, ph), flags=cv2.INTER_LINEAR)


def _patch_height(rng: np.random.Generator, h: int, w: int, aspect: float) -> int:
    """8% to 45% of the frame height, shrunk if a portrait frame is too narrow for it."""
    return max(12, int(min(rng.uniform(0.08, 0.45) * h, 0.75 * w / aspect)))


def photo_of_digit(digit: np.ndarray, rng: np.random.Generator) -> bytes:
    """An MNIST digit as a phone would see it written on paper: what the service must read outside the demo canvas."""
    h, w = _frame(rng)
    ys, xs = np.nonzero(digit > 32)
    crop = digit[max(0, ys.min() - 2) : ys.max() + 3, max(0, xs.min() - 2) : xs.max() + 3].astype(np.float32) / 255
    ph = _patch_height(rng, h, w, crop.shape[1] / crop.shape[0]) * crop.shape[0] // (ys.max() - ys.min() + 1)
    soft = cv2.resize(crop, (max(1, round(ph * crop.shape[1] / crop.shape[0])), ph), interpolation=cv2.INTER_CUBIC)
    soft = cv2.GaussianBlur(soft, (0, 0), rng.uniform(0.3, 0.9) * ph / crop.shape[0])  # irons out the 28 px staircase
    # MNIST strokes are marker-thick; a pen is thinner. A higher cut of the smoothed stroke thins it without breaking it
    # (its core is ~1 everywhere), with edges anti-aliased over a few pixels.
    cut = rng.uniform(0.2, 0.45)
    ink = np.clip((soft - cut) / 0.15, 0, 1)
    if rng.random() < 0.6:
        ink = _rotate(rng, np.pad(ink, ph // 6), 8)
    return _photo(rng, h, w, _place(rng, h, w, ink))


# EXIF orientation -> how a phone's sensor stores a frame that is shown upright after that orientation is applied
_STORED = {
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_90,
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_270,
}


def sensor_pixels(picture: Image.Image, orientation: int) -> Image.Image:
    """The pixels a phone stores for `picture` when EXIF `orientation` turns them upright for showing."""
    return picture if orientation == 1 else picture.transpose(_STORED[orientation])


def as_phone_stores(upload: bytes, orientation: int) -> bytes:
    """A photo as a phone saves it when it was held turned: the pixels as the sensor read them, and an EXIF orientation
    tag saying how to turn them for showing. Every viewer shows it upright; read without the tag a 6 is a 9."""
    exif = Image.Exif()
    exif[0x0112] = orientation
    out = io.BytesIO()
    sensor_pixels(Image.open(io.BytesIO(upload)).convert("RGB"), orientation).save(out, "JPEG", quality=90, exif=exif)
    return out.getvalue()


TIGHT_SCALES = (1, 2, 3, 4, 6, 8, 12)
SMOOTHING = {"nearest": cv2.INTER_NEAREST, "bilinear": cv2.INTER_LINEAR, "bicubic": cv2.INTER_CUBIC}


def tight_crop(
    digit: np.ndarray, rng: np.random.Generator, margin: int | None = None, cut: bool = False, photo: bool | None = None
) -> tuple[dict, bytes]:
    """An MNIST digit cropped to its own ink, as a tightly framed scan or photo is: a margin of 0 to 2 px (0: the ink
    touches all four edges), scaled x1 to x12 with one of three smoothings, either polarity, and half the time in photo
    conditions (uneven light, grain, JPEG; `photo` forces one or the other). `cut`: the crop also cuts a stroke off at
    one edge, as a careless frame does. Returns what was chosen, and the upload."""
    margin = int(rng.integers(0, 3)) if margin is None else margin
    ys, xs = np.nonzero(digit > 0)
    crop = np.pad(digit, margin)[ys.min() : ys.max() + 1 + 2 * margin, xs.min() : xs.max() + 1 + 2 * margin].astype(np.float32) / 255
    edge = None
    if cut:  # a row or column of ink off one side
        edge, k = str(rng.choice(["top", "bottom", "left", "right"])), margin + 1
        crop = {"top": crop[k:], "bottom": crop[:-k], "left": crop[:, k:], "right": crop[:, :-k]}[edge]
    scale, smoothing = int(rng.choice(TIGHT_SCALES)), str(rng.choice(list(SMOOTHING)))
    if scale > 1:
        crop = cv2.resize(crop, (crop.shape[1] * scale, crop.shape[0] * scale), interpolation=SMOOTHING[smoothing])
    dark = bool(rng.random() < 0.5)
    photo = bool(rng.random() < 0.5) if photo is None else photo
    img = np.clip(crop, 0, 1)
    if photo:  # the paper and ink levels of a camera, lit from one side, with sensor grain
        paper, ink = rng.uniform(0.7, 0.95), rng.uniform(0.05, 0.25)
        level = (1 - img) * paper + img * ink if dark else (1 - img) * ink + img * paper
        h, w = img.shape
        y, x = np.mgrid[0:h, 0:w].astype(np.float32)
        a = rng.uniform(0, 2 * np.pi)
        ramp = (np.cos(a) * x / w + np.sin(a) * y / h) * rng.uniform(0, 0.25)
        img = np.clip(level * (1 - ramp + ramp.mean()) + rng.normal(0, rng.uniform(0.005, 0.03), level.shape), 0, 1)
    elif dark:
        img = 1 - img
    im = Image.fromarray((img * 255 + 0.5).astype(np.uint8))
    data = _encode(im, "JPEG", quality=int(rng.integers(60, 96))) if photo else _encode(im, "PNG")
    return {"margin": margin, "scale": scale, "smoothing": smoothing, "dark": dark, "photo": photo, "cut": edge}, data


def _letter(rng: np.random.Generator, h: int, w: int, width: float) -> np.ndarray:
    size = min(h, w)
    im = Image.new("L", (w, h), 0)
    font = ImageFont.load_default(size=int(size * rng.uniform(0.55, 0.75)))
    ImageDraw.Draw(im).text(
        (w / 2, h / 2),
        str(rng.choice(GLYPHS)),
        fill=255,
        font=font,
        anchor="mm",
        stroke_width=int(width * rng.uniform(0.1, 0.4)),
        stroke_fill=255,
    )
    mask = np.asarray(im, np.float32) / 255
    return _rotate(rng, mask, 12) if rng.random() < 0.5 else mask


def _polyline(mask: np.ndarray, pts: np.ndarray, width: float) -> None:
    cv2.polylines(mask, [np.round(pts * 16).astype(np.int32)], False, 1.0, max(1, round(width)), cv2.LINE_AA, 4)


def _scribble(rng: np.random.Generator, h: int, w: int, width: float) -> np.ndarray:
    """Loops that run over each other: a shape no digit class owns, unlike a single 0 or 8."""
    n, loops = 600, rng.integers(3, 9)
    turn = np.convolve(rng.standard_normal(n + 60), np.ones(60) / 60, "valid")[:n] * 0.3
    heading = np.cumsum(turn + rng.choice([-1, 1]) * 2 * np.pi * loops / n) + rng.uniform(0, 2 * np.pi)
    wander = np.cumsum(rng.normal(0, 0.08, n)) + rng.uniform(0, 2 * np.pi)  # loop centres drift, so loops overlap
    pts = np.cumsum(np.stack([np.cos(heading), np.sin(heading)], 1) + 0.15 * np.stack([np.cos(wander), np.sin(wander)], 1), 0)
    if rng.random() < 0.4:
        pts = np.vstack([pts, pts[:1]])
    pts = (pts - pts.min(0)) / (pts.max(0) - pts.min(0)).max()
    mask = np.zeros((h, w), np.float32)
    _polyline(mask, pts * (min(h, w) - 4 * width) + 2 * width, width)
    return mask


def _hatching(rng: np.random.Generator, h: int, w: int, width: float) -> np.ndarray:
    mask = np.zeros((h, w), np.float32)
    side, first = min(h, w), rng.uniform(0, np.pi)
    for a in [first] + ([first + rng.uniform(0.3, 0.5) * np.pi] if rng.random() < 0.5 else []):
        d, normal = np.array([np.cos(a), np.sin(a)]), np.array([-np.sin(a), np.cos(a)])
        n = int(rng.integers(5, 16))
        width = min(width, 0.6 * side / (n - 1) / 2.5)  # lines stay apart, else it is a filled square
        for off in np.linspace(-0.3, 0.3, n) * side:
            c = np.array([w / 2, h / 2]) + off * normal + rng.normal(0, 0.01 * side, 2)
            half = 0.3 * side * rng.uniform(0.8, 1.1)
            _polyline(mask, np.stack([c - half * d, c + half * d]), width)
    return mask


def _noise(rng: np.random.Generator, h: int, w: int, width: float) -> np.ndarray:
    """Specks, blobs and stray marks over the whole frame, as from a dirty lens or a scanner's dust."""
    mask = (rng.random((h, w)) < rng.uniform(0.002, 0.03)).astype(np.float32)
    mask = cv2.dilate(mask, np.ones((2, 2), np.uint8)) if width > 8 else mask
    for _ in range(int(rng.integers(5, 30))):
        c = (int(rng.integers(0, w)), int(rng.integers(0, h)))
        if rng.random() < 0.5:
            axes = (int(rng.uniform(0.3, 1.5) * width) + 1, int(rng.uniform(0.3, 1.5) * width) + 1)
            cv2.ellipse(mask, c, axes, float(rng.uniform(0, 180)), 0, 360, 1.0, -1, cv2.LINE_AA)
        else:
            end = np.array(c) + rng.normal(0, 0.12 * min(h, w), 2)
            _polyline(mask, np.stack([c, end]), width * rng.uniform(0.3, 1))
    return mask


DRAW = {"letter": _letter, "scribble": _scribble, "hatching": _hatching, "noise": _noise}


def non_digit(rng: np.random.Generator, kind: str | None = None) -> tuple[str, bytes]:
    """Something a user might send that must be flagged rather than read as whichever digit it is least unlike."""
    kind = kind or str(rng.choice(NON_DIGIT_KINDS))
    draw = DRAW[kind]
    if rng.random() < 0.5:  # drawn on the demo page's canvas
        mask = draw(rng, CANVAS, CANVAS, CANVAS / 12 * rng.uniform(0.6, 1.3))
        ink = mask if rng.random() < 0.5 else 1 - mask
        return kind, _encode(Image.fromarray((ink * 255 + 0.5).astype(np.uint8)).convert("RGB"), "PNG")
    h, w = _frame(rng)
    if kind == "noise":
        return kind, _photo(rng, h, w, (draw(rng, h, w, min(h, w) * rng.uniform(0.005, 0.02)), 0, 0))
    side = _patch_height(rng, h, w, 1.0)
    return kind, _photo(rng, h, w, _place(rng, h, w, draw(rng, side, side, side * rng.uniform(0.03, 0.09))))


def blank(rng: np.random.Generator, kind: str | None = None) -> tuple[str, bytes]:
    """Nothing written at all: paper texture, shadows and ruling must not be mistaken for a digit."""
    kind = kind or str(rng.choice(BLANK_KINDS))
    if kind == "paper":
        h, w = _frame(rng)
        return kind, _photo(rng, h, w, None)
    if kind != "canvas":
        raise ValueError(f"unknown blank kind {kind!r}")
    mode, colour = [("RGB", (0, 0, 0)), ("RGB", (255, 255, 255)), ("RGBA", (0, 0, 0, 0))][rng.integers(3)]
    return kind, _encode(Image.new(mode, (CANVAS, CANVAS), colour), "PNG")
