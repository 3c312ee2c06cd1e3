"""The two-digit network: multimnist.onnx in process at batch 1 and 32, and `/predict?model=multimnist` (a
PNG picture of two overlapping MNIST test digits, multipart) over loopback at 1 and 4 clients. Skipped when the card
has no two-digit network."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import numpy as np
from PIL import Image

from bench.loadgen import load
from bench.model import session
from harness.clients import build_request, multipart_png
from harness.payloads import MNIST
from harness.server import REPO, Server
from model import MULTIMNIST_FILE
from model.machine import timed

log = logging.getLogger("bench.pairs")
BATCHES = (1, 32)
CONCURRENCY = (1, 4)


def pair_pngs(n: int = 16) -> list[bytes]:
    """Dark ink on white, four times the canvas: a person's picture of two overlapping test digits."""
    from model.data import load_tensors
    from model.multimnist import fixed_test_pairs

    _, _, x, y = load_tensors(MNIST, limit=1)
    out = []
    for img in fixed_test_pairs(x, y, n).image[:, 0].numpy():
        buf = io.BytesIO()
        Image.fromarray((255 - img * 255).astype(np.uint8)).resize((144, 144), Image.BICUBIC).save(buf, "PNG")
        out.append(buf.getvalue())
    return out


def measure(weights: Path, min_seconds: float = 2.0, duration_s: float = 8.0) -> dict:
    card = json.loads((weights / "model-card.json").read_text())
    if "multimnist" not in card:
        return {"skipped": "the model card has no two-digit network"}
    sess = session(weights / MULTIMNIST_FILE)
    rng = np.random.default_rng(0)
    in_process = []
    for b in BATCHES:
        x = (rng.random((b, 1, 36, 36)) < 0.25).astype(np.float32)
        med, _ = timed(lambda x=x: sess.run(None, {"image": x}), min_seconds)
        in_process.append({"batch": b, "ms_per_call": round(med * 1e3, 3), "images_per_s": round(b / med, 1)})
        log.info("pairs in process: batch %d, %.2f ms", b, med * 1e3)
    server = Server({"CAPSNET_WEIGHTS_DIR": str(weights)}).wait_ready()
    try:
        requests = [build_request("127.0.0.1", server.port, "/predict?model=multimnist", *multipart_png(p)) for p in pair_pngs()]
        load(server.url, requests, 1, 1.0, 100)  # warm-up
        service = []
        for c in CONCURRENCY:
            s = load(server.url, requests, c, duration_s, 20000).summary()
            service.append({"concurrency": c, **s})
            log.info("pairs /predict, %d clients: %s", c, s)
    finally:
        server.stop()
    test = card["multimnist"].get("test", {})
    return {
        "model": card["multimnist"]["version"],
        "both_right": test.get("both_right"),
        "committed": weights.resolve() == (REPO / "weights").resolve(),
        "in_process": in_process,
        "service": service,
        "duration_s": duration_s,
    }
