"""Images as users send them, made in the test."""

from __future__ import annotations

import base64
import io

import numpy as np
from PIL import Image


def encode(im: Image.Image, fmt: str = "PNG", **kw) -> bytes:
    buf = io.BytesIO()
    im.save(buf, fmt, **kw)
    return buf.getvalue()


def b64(data: bytes, data_url: bool = False) -> str:
    s = base64.b64encode(data).decode()
    return "data:image/png;base64," + s if data_url else s


def stroke_digit_one(size: int = 120, dark_on_light: bool = True) -> bytes:
    """A thick vertical bar: every reasonable MNIST model reads it as a 1."""
    a = np.zeros((size, size), np.uint8)
    a[size // 6 : size - size // 6, size // 2 - size // 16 : size // 2 + size // 16] = 255
    return encode(Image.fromarray(255 - a if dark_on_light else a))


def png_pixels(b64png: str) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(b64png))))


def capsnet_spec(max_batch: int = 32):
    """The capsnet graph's signature as the service reads it, from the committed weights (for the parser tests)."""
    import onnxruntime as ort

    from service.engine.protocol import TensorSpec
    from service.oip.codec import ModelSpec
    from tests.conftest import WEIGHTS

    session = ort.InferenceSession(str(WEIGHTS / "capsnet.onnx"), providers=["CPUExecutionProvider"])
    inputs, outputs = tuple(map(TensorSpec.of, session.get_inputs())), tuple(map(TensorSpec.of, session.get_outputs()))
    return ModelSpec("capsnet", inputs, outputs, max_batch)
