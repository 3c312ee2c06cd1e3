"""The PNGs the API returns open in any decoder with the values the model produced."""

from __future__ import annotations

import base64
import contextlib
import io

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
