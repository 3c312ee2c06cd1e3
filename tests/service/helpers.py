"""Images as users send them, made in the test."""

from __future__ import annotations

import base64
import io
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import httpx
import numpy as np
from PIL import Image

T = TypeVar("T")


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

    from service.engine.tensors import TensorSpec
    from service.oip.codec import ModelSpec
    from tests.conftest import WEIGHTS

    session = ort.InferenceSession(str(WEIGHTS / "capsnet.onnx"), providers=["CPUExecutionProvider"])
    inputs, outputs = tuple(map(TensorSpec.of, session.get_inputs())), tuple(map(TensorSpec.of, session.get_outputs()))
    return ModelSpec("capsnet", inputs, outputs, max_batch)


def decode_pool_jobs(client: httpx.Client, url: str) -> int:
    """capsnet_decode_pool_jobs, read from /metrics: work admitted to the decode pool and not finished."""
    found = re.search(r"^capsnet_decode_pool_jobs (\S+)$", client.get(url + "/metrics").text, re.M)
    assert found, "no capsnet_decode_pool_jobs on /metrics"
    return int(float(found.group(1)))


def health_while_decoding(url: str, work: Callable[[], T]) -> tuple[T, int]:
    """`work` (requests whose bodies the service decodes or parses off its event loop) runs in a thread while this asks
    /healthz between two scrapes of /metrics, again and again: returns what `work` returned and how many /healthz
    answers came between two scrapes that both saw a decode in progress. Each is the event loop answering while the
    work was under way: a loop the work stalled answers no scrape until the work is done, and counts none. An order of
    events, not a duration: it holds on a machine of any speed and load."""
    seen = 0
    with ThreadPoolExecutor(1) as pool, httpx.Client(timeout=120) as c:
        done = pool.submit(work)
        while not done.done():
            if decode_pool_jobs(c, url) > 0:
                assert c.get(url + "/healthz").status_code == 200
                seen += decode_pool_jobs(c, url) > 0
        return done.result(), seen
