"""A body becomes the same tensor whichever form it takes, and a malformed one is refused saying what was expected."""

from __future__ import annotations

import asyncio
import base64
import io
from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image

from service.errors import Invalid
from service.http.body import JSON, MULTIPART, Body
from service.inputs.body_to_tensor import body_to_tensor
from service.schemas import PredictBatchJSON, PredictJSON
from service.settings import Settings
from service.threads import BoundedPool


@pytest.fixture(scope="module")
def state():
    pool = BoundedPool(1, 10_000_000)
    yield SimpleNamespace(settings=Settings(), bounded_pool=pool)
    pool.shutdown()


def _png() -> bytes:
    a = np.full((120, 90), 255, np.uint8)
    a[20:100, 40:52] = 0  # a dark 1 on white paper, as a scan would have it
    out = io.BytesIO()
    Image.fromarray(a).save(out, "PNG")
    return out.getvalue()


def _multipart(files: list[bytes]) -> Body:
    boundary = "b0undary"
    parts = b"".join(
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="d{i}.png"\r\nContent-Type: image/png\r\n\r\n'.encode()
        + f
        + b"\r\n"
        for i, f in enumerate(files)
    )
    return Body(MULTIPART, f"{MULTIPART}; boundary={boundary}", parts + f"--{boundary}--\r\n".encode())


def _run(body: Body, document, state, size: int = 28, box: int = 20, limit: int = 1) -> np.ndarray:
    return asyncio.run(body_to_tensor(body, document, state.settings, state.bounded_pool, size, box, limit))


def test_every_form_of_one_image_gives_the_same_input(state):
    png = _png()
    b64 = base64.b64encode(png).decode()
    as_file = _run(_multipart([png]), None, state)
    as_json = _run(Body(JSON, JSON, b""), PredictJSON(image=b64), state)
    in_batch = _run(Body(JSON, JSON, b""), PredictBatchJSON(images=[b64, b64]), state, limit=2)
    assert as_file.shape == (1, 1, 28, 28) and as_file.dtype == np.float32 and as_file.max() > 0.5
    assert np.array_equal(as_file, as_json) and np.array_equal(as_json[0], in_batch[1])
    pair = _run(_multipart([png]), None, state, size=36, box=30)
    assert pair.shape == (1, 1, 36, 36)  # the two-digit network's canvas, from the same path


def test_pixels_go_in_as_they_are(state):
    rows = np.linspace(0, 1, 28 * 28, dtype=np.float32).reshape(28, 28)
    got = _run(Body(JSON, JSON, b""), PredictJSON(pixels=rows.tolist()), state)
    assert np.array_equal(got[0, 0], rows)


@pytest.mark.parametrize(
    "document, limit, message",
    [
        (PredictJSON(pixels=[[0.0] * 28] * 27), 1, "pixels must be 28 rows of 28 numbers each, got shape [27, 28]"),
        (PredictBatchJSON(pixels=[[[0.0] * 28] * 28, [[0.0] * 27] * 28]), 2, "image 1: pixels must be 28 rows of 28"),
        (PredictBatchJSON(images=[]), 4, "the batch is empty"),
        (PredictBatchJSON(images=["x"] * 5), 4, "5 images, at most 4 per request"),
    ],
)
def test_malformed_bodies_say_what_was_expected(state, document, limit, message):
    with pytest.raises(Invalid) as e:
        _run(Body(JSON, JSON, b""), document, state, limit=limit)
    assert message in str(e.value.detail)
