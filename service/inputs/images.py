"""Bytes in, pixels out, and back: decoding uploads within limits, encoding PNGs and figure grids."""

from __future__ import annotations

import base64
import binascii
import io
import re
import warnings

import cv2
import numpy as np
import pyspng
from PIL import ExifTags, Image, ImageOps, UnidentifiedImageError

from service.errors import BadInput, TooLarge

ALLOWED_FORMATS = {"PNG", "JPEG", "GIF", "BMP", "WEBP", "MPO"}  # MPO: what phones call a JPEG
ALLOWED_OPEN = sorted(ALLOWED_FORMATS - {"MPO"})  # Pillow's JPEG plugin opens an MPO file as MPO


_WHITESPACE = b" \t\n\r\x0b\x0c"
# libspng holds the GIL while it decodes: only PNGs this small go to it, in pixels and in bytes (the inflate's work),
# at most about 1.5 ms of the event loop's time, under the interpreter's 5 ms switch interval (a 280x280 canvas drawing,
# the page's: 0.4 ms against Pillow's 0.8 with the GIL released; BENCHMARKS.md's notes)
SPNG_MAX_PIXELS = 1 << 17
SPNG_MAX_BYTES = 1 << 16


def decode_base64(text: str, max_bytes: int) -> bytes:
    """Plain base64 or a data: URL (data:image/png;base64,...), line breaks and spaces allowed.

    Each step is one C pass over the text: split-and-join took 0.5 s of the event loop for 16 MB of `QUJD \\n` runs."""
    if text.startswith("data:"):
        head, sep, text = text.partition(",")
        if not sep or ";base64" not in head:
            raise BadInput("data: URL must be base64-encoded (data:image/png;base64,...)")
    if len(text) * 3 // 4 > max_bytes:
        raise TooLarge(f"encoded image is over the {max_bytes} byte limit")
    try:
        return base64.b64decode(text.encode("ascii").translate(None, _WHITESPACE), validate=True)
    except (binascii.Error, ValueError) as e:  # UnicodeEncodeError is a ValueError
        raise BadInput(f"image is not valid base64: {e}") from e


def open_image(data: bytes, max_pixels: int) -> Image.Image:
    """Read an upload's header only: its format and size are checked before any pixel is decoded, so a small file
    that claims 30000x30000 pixels is refused without allocating them, and the caller can tell a heavy decode
    (by pixel count, not file size: a 63 KB PNG can hold 16 M pixels) from a light one."""
    if not data:
        raise BadInput("empty image")
    try:
        with warnings.catch_warnings():
            # Pillow's own guard warns from 89 M pixels: the limit below is lower, and says so in the service's words
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            # only the allowed formats' header parsers see a stranger's bytes: Pillow tries no other plugin (PSD, FITS, ...)
            im = Image.open(io.BytesIO(data), formats=ALLOWED_OPEN)
            w, h = im.size
            if w * h > max_pixels:
                raise TooLarge(f"image is {w}x{h} = {w * h} pixels, over the {max_pixels} pixel limit")
            if w < 1 or h < 1:
                raise BadInput("image has no pixels")
    except (TooLarge, BadInput):
        raise
    except Image.DecompressionBombError as e:  # past twice Pillow's guard it refuses to open at all; its text has the size
        claimed = re.search(r"\((\d+) pixels\)", str(e))
        size = f"{claimed[1]} pixels, " if claimed else ""
        raise TooLarge(f"image is {size}over the {max_pixels} pixel limit") from e
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, EOFError) as e:
        raise BadInput("cannot decode image: not a readable PNG, JPEG, GIF, BMP or WebP file") from e
    return im


def canvas_rgba8(data: bytes, im: Image.Image, max_side: int) -> np.ndarray | None:
    """An 8-bit RGBA PNG, what a canvas exports, decoded by libspng (pyspng) as uint8 [H,W,4]: the values Pillow's decode
    gives, in a fifth of its time as a browser encodes a canvas (two thirds at zlib's default level, most of it
    the inflate). None for any other image, one `decode` would reduce (over 2 x `max_side`), one over SPNG_MAX_PIXELS or
    SPNG_MAX_BYTES, an animation's frame control (where Pillow reads the frame, libspng the whole image), or one libspng
    refuses: Pillow decodes those, and says what is wrong. libspng, as pyspng sets it up, checks no checksums: a PNG
    whose only fault is a wrong CRC or Adler-32 is read, not refused."""
    w, h = im.size
    if im.format != "PNG" or im.mode != "RGBA" or w * h > SPNG_MAX_PIXELS or len(data) > SPNG_MAX_BYTES:
        return None
    if "exif" in im.info:  # an orientation to apply: `decode` does (a canvas's export carries none)
        return None
    if max(w, h) // max_side >= 2:
        return None
    # one frame and no frame control (fcTL: Pillow's info has its bbox), not interlaced, 8 bits a sample (Pillow reads
    # a 16-bit file as rawmode RGBA;16B)
    if getattr(im, "n_frames", 1) != 1 or "bbox" in im.info or im.info.get("interlace"):
        return None
    if len(im.tile) != 1 or im.tile[0].args != "RGBA" or tuple(im.tile[0].extents) != (0, 0, w, h):
        return None
    try:
        rgba = pyspng.load(data, "RGBA")
    except RuntimeError:
        return None
    return rgba if rgba.shape == (h, w, 4) else None


def load_pixels(im: Image.Image, max_side: int) -> tuple[np.ndarray, np.ndarray | None]:
    """Decode an opened image into values in [0,1]: grey [H,W] or RGB [H,W,3], plus alpha [H,W] if it has one,
    at most about 2 x `max_side` on the longer edge (`decode`). Animated images give their first frame."""
    return pixel_values(decode(im, max_side))


def load_alpha(im: Image.Image, max_side: int) -> np.ndarray | None:
    """Only the alpha [H,W] that load_pixels gives, as 8-bit values (uint8; load_pixels' are these over 255), None for an
    image without one: a drawing's ink is its alpha, and the float copy of the colour channels it never reads was a
    third of a canvas's decode (BENCHMARKS.md's notes); preprocess.drawing_to_mnist makes floats of the ink's box alone."""
    im = decode(im, max_side)
    if not _has_alpha(im):
        return None
    return np.asarray((im if im.mode in ("RGBA", "LA") else im.convert("RGBA")).getchannel("A"))


def rgba8(im: Image.Image) -> np.ndarray | None:
    """A decoded 8-bit image with an alpha channel as uint8 [H,W,4], None for any other: what a drawing is told by
    (preprocess.is_drawing) before any float copy is made."""
    if not _has_alpha(im):
        return None
    return np.asarray(im if im.mode == "RGBA" else im.convert("RGBA"))


def decode(im: Image.Image, max_side: int) -> Image.Image:
    """The opened image decoded at most about 2 x `max_side` on the longer edge: a JPEG is decoded at reduced scale by
    libjpeg itself (Pillow's draft), anything else reduced by whole-pixel box averaging right after decoding, before any
    float copy is made (a 4000x4000 RGBA image would be 256 MB as float32)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            if im.format in ("JPEG", "MPO") and max(im.size) > 2 * max_side:
                w, h = im.size
                scale = max_side / max(w, h)
                im.draft(im.mode if im.mode in ("L", "RGB") else "RGB", (max(1, int(w * scale)), max(1, int(h * scale))))
            im.seek(0)
            im.load()
            factor = max(im.size) // max_side
            if factor >= 2:
                if im.mode.startswith("I;16"):
                    im = im.convert("I")
                if im.mode not in ("L", "LA", "RGB", "RGBA", "I", "F"):
                    im = im.convert("RGBA" if _has_alpha(im) else "RGB")
                im = im.reduce(factor)
            im = upright(im)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as e:
        raise TooLarge(f"image refused as a decompression bomb: {e}") from e
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, EOFError) as e:  # its header was read: the rest is not
        raise BadInput(f"cannot decode image: this {im.format or 'image'} file is truncated or corrupt") from e
    return im


def upright(im: Image.Image) -> Image.Image:
    """A decoded image turned as its EXIF orientation says, as every viewer shows it: a phone stores a photo as its
    sensor read it and tags how to turn it, so a 6 photographed with the phone upside down arrives as a 9 with a tag.
    Applied after `decode`'s reduction, where turning moves the fewest pixels; an image without EXIF costs a dict lookup."""
    if "exif" not in im.info:
        return im
    try:
        orientation = im.getexif().get(ExifTags.Base.Orientation, 1)
    except Exception:  # EXIF that cannot be read is ignored, as viewers ignore it: the pixels are what counts
        return im
    if orientation not in range(2, 9):
        return im
    return ImageOps.exif_transpose(im)


def _has_alpha(im: Image.Image) -> bool:
    return im.mode in ("RGBA", "LA", "PA") or (im.mode == "P" and "transparency" in im.info)


def pixel_values(im: Image.Image) -> tuple[np.ndarray, np.ndarray | None]:
    """A decoded image's values in [0,1]: grey [H,W] or RGB [H,W,3], and its alpha [H,W] if it has one."""
    mode = im.mode
    if mode in ("I;16", "I;16B", "I;16L", "I;16N", "I"):
        arr = np.asarray(im, dtype=np.float64)
        top = 65535.0 if mode.startswith("I;16") or arr.max() > 255 else 255.0
        return np.clip(arr / top, 0, 1).astype(np.float32), None
    if mode == "F":
        arr = np.nan_to_num(np.asarray(im, dtype=np.float32))
        top = float(arr.max()) if arr.size and arr.max() > 1 else 1.0
        return np.clip(arr / top, 0, 1), None
    if _has_alpha(im):
        rgba = np.asarray(im.convert("RGBA"), dtype=np.float32) / 255.0
        return rgba[..., :3], rgba[..., 3]
    if mode == "L":
        return np.divide(np.asarray(im), np.float32(255.0), dtype=np.float32), None
    if mode == "1":
        return np.asarray(im.convert("L"), dtype=np.float32) / 255.0, None
    return np.asarray(im.convert("RGB"), dtype=np.float32) / 255.0, None


def encode_png(pixels: np.ndarray) -> str:
    """[H,W] values in [0,1] -> base64 of an 8-bit grey PNG, by OpenCV's encoder (already loaded for preprocessing).
    Rows unfiltered: libpng's choice of a filter a row cost more than the deflate, and on a digit's black ground and
    soft strokes it saved nothing (a 28x28 MNIST digit 21 -> 15 us and 262 -> 236 bytes; a 280x308 grid of blurred
    digits 1.43 -> 0.82 ms for 7% more bytes; BENCHMARKS.md's notes)."""
    grey = (np.clip(pixels, 0, 1) * 255.0 + 0.5).astype(np.uint8)
    ok, png = cv2.imencode(".png", grey, _PNG_FAST)
    if not ok:
        raise RuntimeError("OpenCV could not encode a PNG")
    return base64.b64encode(png.tobytes()).decode("ascii")


_PNG_FAST = [cv2.IMWRITE_PNG_COMPRESSION, 1, cv2.IMWRITE_PNG_FILTER, cv2.IMWRITE_PNG_FILTER_NONE]


def tile_grid(tiles: np.ndarray) -> np.ndarray:
    """[rows, cols, H, W] -> one [rows*H, cols*W] image, no gaps (the paper's Figure 4 layout)."""
    r, c, h, w = tiles.shape
    return tiles.transpose(0, 2, 1, 3).reshape(r * h, c * w)
