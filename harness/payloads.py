"""Request bodies for load: real MNIST test digits as PNG uploads when the data is at hand, else drawn ones."""

from __future__ import annotations

import io
import json
from pathlib import Path

import cv2
import numpy as np
import orjson
from PIL import Image

from harness.clients import build_request, multipart_png

MNIST = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "mnist"


def stroke_images(batch: int) -> np.ndarray:
    """float32 [batch,1,28,28]: a vertical bar, a "1", as in-process timings feed the network."""
    x = np.zeros((batch, 1, 28, 28), np.float32)
    x[:, :, 6:22, 12:16] = 1.0
    return x


def browser_png(rgba: np.ndarray) -> bytes:
    """RGBA pixels [H,W,4] as Chromium's canvas exports them (toDataURL): every row filtered Up, zlib at its fastest level.
    How a PNG was compressed sets most of its decode: so encoded, a drawing decodes several times faster than the same
    pixels at zlib's default level, as Pillow writes them (BENCHMARKS.md's notes)."""
    params = [cv2.IMWRITE_PNG_FILTER, cv2.IMWRITE_PNG_FILTER_UP, cv2.IMWRITE_PNG_COMPRESSION, 1]
    ok, png = cv2.imencode(".png", cv2.cvtColor(np.ascontiguousarray(rgba, np.uint8), cv2.COLOR_RGBA2BGRA), params)
    assert ok
    return png.tobytes()


def digit_pngs(n: int = 32) -> list[bytes]:
    """Dark ink on white, as a user's scan would be."""
    try:
        from model.data import load_mnist

        images = load_mnist(MNIST, "test")[0][:n]
    except Exception:  # no MNIST here: vertical strokes of varying slant
        images = np.zeros((n, 28, 28), np.uint8)
        for k in range(n):
            for r in range(4, 24):
                c = 14 + (r - 14) * (k % 5 - 2) // 8
                images[k, r, c - 1 : c + 2] = 255
    out = []
    for x in images:
        buf = io.BytesIO()
        Image.fromarray(255 - x).save(buf, "PNG")
        out.append(buf.getvalue())
    return out


def predict_requests(url_host: str, port: int, n: int = 32) -> list[bytes]:
    reqs = []
    for png in digit_pngs(n):
        body, ctype = multipart_png(png)
        reqs.append(build_request(url_host, port, "/predict", body, ctype))
    return reqs


OIP_INFER = "/v2/models/capsnet/infer"


def tensor_images(n: int = 16) -> list[np.ndarray]:
    """float32 [1,1,28,28] each: a bar of slightly varying ink, as a client that preprocesses itself sends the network."""
    rng = np.random.default_rng(0)
    out = []
    for _ in range(n):
        image = np.zeros((1, 1, 28, 28), np.float32)
        image[0, 0, 6:22, 12:16] = rng.uniform(0.8, 1.0, (16, 4)).astype(np.float32)
        out.append(image)
    return out


def oip_binary_requests(port: int, images: list[np.ndarray]) -> list[bytes]:
    """`capsnet` inferences over the Open Inference Protocol's REST binary tensor extension (raw bytes after the JSON
    head), lengths and poses asked for as binary: the service's path with no image work of its own."""
    out = []
    for x in images:
        raw = x.astype("<f4").tobytes()
        head = orjson.dumps(
            {
                "inputs": [{"name": "image", "datatype": "FP32", "shape": [1, 1, 28, 28], "parameters": {"binary_data_size": len(raw)}}],
                "outputs": [
                    {"name": "lengths", "parameters": {"binary_data": True}},
                    {"name": "poses", "parameters": {"binary_data": True}},
                ],
            }
        )
        # build_request's own head, with the header that says where the JSON ends
        request = build_request("127.0.0.1", port, OIP_INFER, head + raw, "application/octet-stream")
        out.append(request.replace(b"\r\n", f"\r\nInference-Header-Content-Length: {len(head)}\r\n".encode(), 1))
    return out


def reconstruct_requests(url_host: str, port: int, n: int = 32) -> list[bytes]:
    rng = np.random.default_rng(0)
    return [
        build_request(
            url_host,
            port,
            "/reconstruct",
            json.dumps({"digit": int(k % 10), "pose": (rng.normal(0, 0.15, 16)).round(4).tolist()}).encode(),
            "application/json",
        )
        for k in range(n)
    ]


def bad_requests(url_host: str, port: int) -> list[bytes]:
    """A mix of what hostile or careless clients send; every one must get a 4xx."""
    j = "application/json"
    return [
        build_request(url_host, port, "/predict", b"\x89PNG\r\n\x1a\n" + b"\x00" * 200, multipart_png(b"")[1]),
        build_request(url_host, port, "/predict", *multipart_png(b"not an image at all")),
        build_request(url_host, port, "/predict", b'{"pixels": [[NaN]]}', j),
        build_request(url_host, port, "/predict", b"[" * 5000, j),
        build_request(url_host, port, "/predict", b"hello", "text/plain"),
        build_request(url_host, port, "/reconstruct", b'{"digit": 10, "pose": []}', j),
        build_request(url_host, port, "/perturb", json.dumps({"digit": 1, "pose": [0] * 16, "deltas": [0] * 50}).encode(), j),
        build_request(url_host, port, "/predict", json.dumps({"image": "!!!"}).encode(), j),
    ]
