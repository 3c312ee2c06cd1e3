"""Heavy uploads do not stall the service: decoded off the event loop, in a pool with a bounded number of places."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient
from PIL import Image

from harness.server import Server
from service.app import create_app
from service.inputs.images import load_pixels, open_image
from service.inputs.preprocess import WORK_SIDE, to_mnist
from service.inputs.uploads import to_inputs
from service.settings import Settings
from tests.service.helpers import encode, health_while_decoding

HEAVY_SIDE = 4000  # 16 M pixels: about the largest legal upload under the default pixel limit (2**24)


def heavy_png() -> bytes:
    """A ~60 KB PNG of 4000x4000 RGBA pixels (a stroke on transparency): small on the wire, seconds to decode."""
    a = np.zeros((HEAVY_SIDE, HEAVY_SIDE, 4), np.uint8)
    a[800:3200, 1900:2100] = (0, 0, 0, 255)
    return encode(Image.fromarray(a, "RGBA"), optimize=False, compress_level=9)


@pytest.fixture(scope="module")
def big() -> bytes:
    return heavy_png()


def test_an_uploaded_drawing_reads_as_its_decoded_values_do() -> None:
    """A drawing judged on its 8-bit values answers as the same picture judged in floats; a picture that is not one too."""
    drawing = np.zeros((280, 280, 4), np.uint8)
    drawing[60:220, 120:150] = (20, 20, 20, 255)
    drawing[58:62, 118:152, 3] = 128  # soft edges
    cut_out = drawing.copy()
    cut_out[:, :140, :3] = 230  # paper cut out onto transparency: two colours
    for a in (drawing, cut_out):
        png = encode(Image.fromarray(a, "RGBA"))
        got = asyncio.run(to_inputs([png], pool=None, max_pixels=10**6, inline_pixels=10**6, size=28, box=20))
        assert np.array_equal(got[0, 0], to_mnist(*load_pixels(open_image(png, 10**6), WORK_SIDE)))
        assert got.max() > 0.9


def test_a_large_jpeg_is_decoded_at_reduced_scale():
    photo = encode(Image.new("RGB", (4032, 3024), "white"), "JPEG", quality=80)
    pixels, alpha = load_pixels(open_image(photo, 16_000_000), WORK_SIDE)
    assert max(pixels.shape[:2]) <= 2 * WORK_SIDE and alpha is None


def test_a_large_png_is_reduced_before_it_becomes_floats(big):
    pixels, alpha = load_pixels(open_image(big, 16_000_000), WORK_SIDE)
    assert max(pixels.shape[:2]) < 2 * WORK_SIDE and alpha is not None and alpha.shape == pixels.shape[:2]


def test_health_answers_while_four_heavy_uploads_are_processed(big):
    """Before: a 4000x4000 PNG decoded on the event loop held /healthz for 4.7 s, four of them ~13 s. Now each /healthz
    asked while they are decoded is answered while they still are."""
    server = Server({"CAPSNET_INTRA_OP_THREADS": "1"}).wait_ready()
    try:

        def upload() -> int:
            r = httpx.post(server.url + "/predict", files={"file": ("big.png", big, "image/png")}, timeout=120)
            assert r.status_code == 200 or (r.status_code == 503 and "retry-after" in r.headers), r.text[:200]
            return r.status_code

        def four() -> list[int]:
            with ThreadPoolExecutor(4) as pool:
                return [u.result() for u in [pool.submit(upload) for _ in range(4)]]

        statuses, answered = health_while_decoding(server.url, four)
        assert len(statuses) == 4 and 200 in statuses
        assert answered >= 5, f"/healthz answered {answered} times while the uploads were decoded"
    finally:
        server.stop()


def test_a_full_decode_pool_answers_503_with_retry_after(big):
    settings = Settings(intra_op_threads=1, warmup_runs=0, decode_workers=1, decode_pool_pixels=16_000_000)
    with TestClient(create_app(settings)) as client:
        barrier = threading.Barrier(3)

        def upload() -> httpx.Response:
            barrier.wait()
            return client.post("/predict", files={"file": ("big.png", big, "image/png")})

        with ThreadPoolExecutor(3) as pool:
            responses = list(pool.map(lambda _: upload(), range(3)))
    codes = sorted(r.status_code for r in responses)
    assert codes[0] == 200 and codes[-1] == 503, codes
    busy = next(r for r in responses if r.status_code == 503)
    assert busy.headers["retry-after"] == "1" and busy.json()["error"] == "overloaded"
    assert client.app.state.capsnet.bounded_pool.pixels_in_flight == 0  # every pixel given back
