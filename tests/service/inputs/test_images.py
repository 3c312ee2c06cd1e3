"""The PNGs the API returns open in any decoder with the values the model produced."""

from __future__ import annotations

import base64
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
