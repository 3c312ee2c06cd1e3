"""What real input costs: decoding and preprocessing by kind of upload, the counterfactual decoder runs every
/predict now makes, and how long /healthz waits while the heaviest legal uploads are processed."""

from __future__ import annotations

import io
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np
from PIL import Image

from harness.payloads import browser_png, digit_pngs, stroke_images
from harness.server import Server
from model.machine import timed


def _encode(im: Image.Image, fmt: str, **kw: int) -> bytes:
    buf = io.BytesIO()
    im.save(buf, fmt, **kw)
    return buf.getvalue()


def canvas_png() -> bytes:
    """A 280x280 drawing as the page sends it: a dark stroke, the ink as alpha on a transparent ground, encoded as the
    browser exports a canvas."""
    canvas = np.zeros((280, 280, 4), np.uint8)
    canvas[..., :3] = (17, 20, 24)
    canvas[40:240, 130:152, 3] = 255
    return browser_png(canvas)


def uploads() -> dict[str, bytes]:
    """One upload of each kind a user sends, from a 28x28 MNIST PNG to the largest legal PNG."""
    rng = np.random.default_rng(0)
    photo = np.clip(rng.normal(200, 8, (900, 1200, 3)), 0, 255).astype(np.uint8)
    photo[300:600, 580:600] = 40
    heavy = np.zeros((4000, 4000, 4), np.uint8)
    heavy[800:3200, 1900:2100] = (0, 0, 0, 255)
    return {
        "MNIST digit, 28x28 PNG": digit_pngs(1)[0],
        "page canvas, 280x280 PNG": canvas_png(),
        "photo, 1200x900 JPEG": _encode(Image.fromarray(photo), "JPEG", quality=85),
        "phone photo, 4032x3024 JPEG": _encode(Image.fromarray(photo).resize((4032, 3024)), "JPEG", quality=85),
        "4000x4000 RGBA PNG": _encode(Image.fromarray(heavy, "RGBA"), "PNG", compress_level=9),
    }


def preprocess_costs(min_seconds: float) -> list[dict]:
    from service.inputs.images import load_pixels, open_image
    from service.inputs.preprocess import WORK_SIDE, drawing_to_mnist, to_mnist

    def as_photo(data: bytes) -> np.ndarray:
        return to_mnist(*load_pixels(open_image(data, 16_000_000), WORK_SIDE))

    def as_drawing(data: bytes) -> np.ndarray:
        return drawing_to_mnist(load_pixels(open_image(data, 16_000_000), WORK_SIDE)[1])

    files = uploads()
    kinds = [(name, data, as_photo) for name, data in files.items()]
    kinds.insert(2, ("page canvas, 280x280 PNG, `source: canvas`", files["page canvas, 280x280 PNG"], as_drawing))
    rows = []
    for name, data, fn in kinds:
        seconds, _ = timed(lambda d=data, f=fn: f(d), min_seconds)
        im = open_image(data, 16_000_000)
        rows.append({"upload": name, "bytes": len(data), "pixels": im.size[0] * im.size[1], "ms": round(seconds * 1000, 3)})
    return rows


def counterfactual_costs(weights: Path, min_seconds: float) -> list[dict]:
    """The network alone against the network plus the decoder on all ten capsules (what Engine.predict runs)."""
    from service.engine.card import load_card
    from service.engine.local import load_engine

    card = load_card(weights)
    rows = []
    for precision in ("fp32", "int8"):
        engine = load_engine(weights, card, "cpu", 0, precision)
        for batch in (1, 32):
            x = stroke_images(batch)
            net, _ = timed(lambda e=engine, x=x: e.capsnet.run(None, {"image": x}), min_seconds)
            full, _ = timed(lambda e=engine, x=x: e.predict(x), min_seconds)
            rows.append(
                {
                    "precision": precision,
                    "batch": batch,
                    "network_ms": round(net * 1000, 3),
                    "with_counterfactuals_ms": round(full * 1000, 3),
                    "added": round(full / net - 1, 3),
                }
            )
    return rows


def health_under_heavy_uploads(uploads_at_once: int = 4) -> dict:
    """/healthz probed every 20 ms while `uploads_at_once` 4000x4000 RGBA PNGs are posted together."""
    heavy = uploads()["4000x4000 RGBA PNG"]
    server = Server({"CAPSNET_INTRA_OP_THREADS": "1"}).wait_ready()
    try:
        statuses, durations, probes = [], [], []

        def post() -> None:
            t0 = time.perf_counter()
            r = httpx.post(server.url + "/predict", files={"file": ("big.png", heavy, "image/png")}, timeout=120)
            durations.append(round((time.perf_counter() - t0) * 1000))
            statuses.append(r.status_code)

        with ThreadPoolExecutor(uploads_at_once) as pool:
            jobs = [pool.submit(post) for _ in range(uploads_at_once)]
            while not all(j.done() for j in jobs):
                t0 = time.perf_counter()
                urllib.request.urlopen(server.url + "/healthz", timeout=30).read()
                probes.append((time.perf_counter() - t0) * 1000)
                time.sleep(0.02)
        return {
            "uploads": uploads_at_once,
            "upload_bytes": len(heavy),
            "statuses": sorted(statuses),
            "upload_ms": sorted(durations),
            "healthz_probes": len(probes),
            "healthz_p50_ms": round(float(np.median(probes)), 1),
            "healthz_max_ms": round(max(probes), 1),
        }
    finally:
        server.stop()


def measure(weights: Path, min_seconds: float = 2.0) -> dict:
    return {
        "preprocess": preprocess_costs(min_seconds),
        "counterfactuals": counterfactual_costs(weights, min_seconds),
        "health_under_heavy_uploads": health_under_heavy_uploads(),
    }
