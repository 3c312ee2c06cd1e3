"""The PNGs the API returns open in any decoder with the values the model produced."""

from __future__ import annotations

import base64
import contextlib
import io
import struct
import zlib

import cv2
import numpy as np
import pytest
from PIL import Image

from service.inputs.images import encode_png


@pytest.mark.parametrize("shape", [(28, 28), (448, 308), (1, 1)])
def test_png_decodes_to_the_rounded_values(shape):
    x = np.random.default_rng(0).random(shape, dtype=np.float32) * 1.2 - 0.1  # some values past [0,1]
    im = Image.open(io.BytesIO(base64.b64decode(encode_png(x))))
    im.load()  # checks every chunk's CRC and the zlib stream
    assert im.mode == "L" and im.size == (shape[1], shape[0])
    assert np.array_equal(np.asarray(im), (np.clip(x, 0, 1) * 255 + 0.5).astype(np.uint8))


@pytest.mark.parametrize("fmt, plugin", [("TIFF", "TiffImagePlugin.TiffImageFile"), ("SGI", "SgiImagePlugin.SgiImageFile")])
def test_a_format_pillow_knows_but_the_service_does_not_take_is_refused_unread(fmt, plugin, monkeypatch):
    """A stranger's bytes meet only the allowed formats' parsers: the plugin of another format is never asked to open them."""
    import importlib

    from service.errors import BadInput
    from service.inputs.images import open_image

    module, cls = plugin.split(".")
    target = getattr(importlib.import_module(f"PIL.{module}"), cls)
    opened = []
    monkeypatch.setattr(target, "_open", lambda self: opened.append(fmt))
    buf = io.BytesIO()
    Image.new("RGB", (20, 20), "white").save(buf, format=fmt)
    with pytest.raises(BadInput, match="not a readable PNG, JPEG, GIF, BMP or WebP"):
        open_image(buf.getvalue(), 1_000_000)
    assert opened == []
    with contextlib.suppress(Exception):  # where every plugin may try, that one is asked (and, stubbed here, fails)
        Image.open(io.BytesIO(buf.getvalue()))
    assert opened == [fmt]


@pytest.mark.parametrize("mode", ["RGBA", "LA", "P", "RGB"])
def test_a_drawings_alpha_is_the_one_every_upload_gets(mode):
    """A `source: canvas` drawing decodes its alpha alone: the same values an upload's full decode gives it, whatever the
    file's mode (none for an image without alpha), large files reduced alike."""
    from service.inputs.images import load_alpha, load_pixels, open_image

    rgba = np.zeros((600, 500, 4), np.uint8)
    rgba[100:500, 200:260] = (17, 20, 24, 255)
    rgba[90:100, 200:260, 3] = 128  # a soft edge
    im = Image.fromarray(rgba, "RGBA")
    im = im.convert("RGBA").convert("P", palette=Image.Palette.ADAPTIVE) if mode == "P" else im.convert(mode)
    buf = io.BytesIO()
    im.save(buf, "PNG", **({"transparency": int(np.asarray(im)[0, 0])} if mode == "P" else {}))
    data = buf.getvalue()
    alpha = load_alpha(open_image(data, 10**6), 250)
    full = load_pixels(open_image(data, 10**6), 250)[1]
    if mode == "RGB":
        assert alpha is None and full is None
    else:
        assert alpha is not None and alpha.shape == (300, 250) and alpha.dtype == np.uint8 and alpha.max() == 255
        assert np.array_equal(np.divide(alpha, np.float32(255.0), dtype=np.float32), full)


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _written_png(rgba: np.ndarray, interlaced: bool = False, before_pixels: bytes = b"") -> bytes:
    """An 8-bit RGBA PNG written chunk by chunk: Adam7-interlaced, or with chunks (an animation's) before its pixels."""
    h, w = rgba.shape[:2]
    passes = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]
    images = [rgba[y::dy, x::dx] for x, y, dx, dy in passes] if interlaced else [rgba]
    rows = b"".join(b"\0" + row.tobytes() for image in images if image.size for row in image)  # filter 0: each row as it is
    head = _chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 6, 0, 0, int(interlaced)))
    return b"\x89PNG\r\n\x1a\n" + head + before_pixels + _chunk(b"IDAT", zlib.compress(rows)) + _chunk(b"IEND", b"")


def _png(pixels: np.ndarray, **options) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, "PNG", **options)
    return buf.getvalue()


def test_a_canvas_png_is_decoded_by_libspng_to_pillows_values():
    """An 8-bit RGBA PNG, what a canvas exports, gets Pillow's values from the faster decoder, whatever its compression."""
    from service.inputs.images import canvas_rgba8, decode, open_image, rgba8

    rng = np.random.default_rng(0)
    for level in (1, 6, 9):
        rgba = np.zeros((280, 280, 4), np.uint8)  # a transparent ground, strokes of a few colours with soft edges
        for _ in range(4):
            colour = [int(v) for v in rng.integers(0, 256, 4)]
            cv2.polylines(rgba, [rng.integers(0, 280, (5, 2)).astype(np.int32)], False, colour, 18, cv2.LINE_AA)
        data = _png(rgba, compress_level=level)
        fast = canvas_rgba8(data, open_image(data, 10**6), 1024)
        assert fast is not None and np.array_equal(fast, rgba)
        assert np.array_equal(fast, rgba8(decode(open_image(data, 10**6), 1024)))


def test_what_libspng_is_not_given_goes_to_pillow():
    """Not an 8-bit RGBA PNG of one frame, interlaced, with an animation's frame control, over the size that holds the
    event loop for more than a moment (libspng keeps the GIL), one `decode` reduces, or a broken file: Pillow decodes it,
    or says what is wrong."""
    from service.errors import BadInput
    from service.inputs.images import SPNG_MAX_BYTES, SPNG_MAX_PIXELS, canvas_rgba8, decode, open_image

    small = np.zeros((30, 40, 4), np.uint8)
    noise = _png(np.random.default_rng(2).integers(0, 256, (200, 200, 4), dtype=np.uint8))
    assert len(noise) > SPNG_MAX_BYTES
    _, sixteen = cv2.imencode(".png", small.astype(np.uint16))
    side = int(SPNG_MAX_PIXELS**0.5) + 1
    buf = io.BytesIO()
    Image.fromarray(small).save(buf, "PNG", save_all=True, append_images=[Image.fromarray(small + 1)])
    for data, max_side in [
        (_png(small[..., :3]), 1024),  # RGB
        (sixteen.tobytes(), 1024),  # 16 bits a sample
        (buf.getvalue(), 1024),  # animated
        (_png(np.zeros((side, side, 4), np.uint8)), 1024),  # too many pixels for libspng
        (noise, 1024),  # too many bytes
        (_png(small), 20),  # reduced by decode
    ]:
        assert canvas_rgba8(data, open_image(data, 10**8), max_side) is None
    drawing = np.zeros((64, 64, 4), np.uint8)
    drawing[8:56, 28:36] = (20, 20, 20, 255)
    frame = _chunk(b"fcTL", struct.pack(">IIIIIHHBB", 0, 64, 32, 0, 0, 1, 10, 0, 0))  # a frame of the top half alone
    for data in (_written_png(drawing, interlaced=True), _written_png(drawing, before_pixels=frame)):
        im = open_image(data, 10**6)
        assert canvas_rgba8(data, im, 1024) is None
        assert np.asarray(decode(im, 1024)).shape == (64, 64, 4)
    plain = _written_png(drawing)  # the same, as a canvas writes it: libspng's
    assert np.array_equal(canvas_rgba8(plain, open_image(plain, 10**6), 1024), drawing)
    whole = _png(np.random.default_rng(1).integers(0, 256, (50, 50, 4), dtype=np.uint8))
    im = open_image(whole[: len(whole) // 2], 10**6)  # the header is whole, the pixels are not
    assert canvas_rgba8(whole[: len(whole) // 2], im, 1024) is None
    with pytest.raises(BadInput, match="cannot decode image"):
        decode(im, 1024)


@pytest.mark.parametrize("fmt, mode", [("JPEG", "L"), ("PNG", "RGBA"), ("WEBP", "RGB")])
@pytest.mark.parametrize("orientation", range(1, 9))
def test_an_image_is_decoded_as_its_exif_orientation_shows_it(fmt, mode, orientation):
    """Each of EXIF's eight orientations, in each format that carries one (a PNG with an alpha channel too, which would
    otherwise take libspng's road): the decoded pixels are the upright picture's."""
    from service.inputs.images import canvas_rgba8, decode, open_image
    from tests.service.realworld import sensor_pixels

    upright = Image.new(mode, (40, 24), 0)  # an L in one corner: no turn or mirror of it matches another
    upright.paste(255, (2, 2, 6, 20))
    upright.paste(255, (2, 16, 16, 20))
    stored = sensor_pixels(upright, orientation)
    exif = Image.Exif()
    exif[0x0112] = orientation
    buf = io.BytesIO()
    stored.save(buf, fmt, exif=exif, **({"quality": 100} if fmt != "PNG" else {}))
    data = buf.getvalue()
    im = open_image(data, 10**6)
    assert canvas_rgba8(data, im, 56) is None  # an orientation to apply: never read around `decode`
    got = np.asarray(decode(im, 56).convert("L"), np.float32)
    assert got.shape == (24, 40)
    assert np.abs(got - np.asarray(upright.convert("L"), np.float32)).mean() < 8


def test_unreadable_exif_is_ignored_as_viewers_ignore_it():
    from service.inputs.images import decode, open_image

    buf = io.BytesIO()
    Image.new("L", (30, 20), 200).save(buf, "JPEG", exif=b"Exif\x00\x00not a TIFF header at all")
    assert decode(open_image(buf.getvalue(), 10**6), 56).size == (30, 20)
