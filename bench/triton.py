"""The Open Inference Protocol, ours against Triton's own HTTP front, on the same model file: `capsnet` (the FP32
graph, weights/capsnet.onnx) at 1, 4 and 16 clients, the two servers alternated level by level. Triton is
nvidia-pytriton's tritonserver with its Python backend running that file in onnxruntime (harness/tritonserver.py; the
ONNX Runtime backend is not on PyPI); the service runs it in process (CAPSNET_PRECISION=fp32). The same request to
both: one 28x28 image as JSON, the lengths and poses asked for as JSON. Needs the Triton venv (tests/triton/setup.sh);
without it the part reports that and measures nothing."""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

import numpy as np
import orjson

from bench.loadgen import load
from harness.clients import build_request
from harness.server import Server
from harness.tritonserver import TritonServer, TritonUnavailable

log = logging.getLogger("bench.triton")
CONCURRENCY = (1, 4, 16)
PATH = "/v2/models/capsnet/infer"


def _requests(port: int, n: int = 16) -> list[bytes]:
    rng = np.random.default_rng(0)
    out = []
    for _ in range(n):
        image = np.zeros((28, 28), np.float32)
        image[6:22, 12:16] = rng.uniform(0.8, 1.0, (16, 4)).astype(np.float32)
        body = {
            "inputs": [{"name": "image", "datatype": "FP32", "shape": [1, 1, 28, 28], "data": image.ravel().round(4).tolist()}],
            "outputs": [{"name": "lengths"}, {"name": "poses"}],
        }
        out.append(build_request("127.0.0.1", port, PATH, orjson.dumps(body), "application/json"))
    return out


def measure(duration_s: float = 8.0, max_requests: int = 20000) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        try:
            triton = TritonServer(Path(tmp))
        except TritonUnavailable as e:
            return {"skipped": f"{e}: run tests/triton/setup.sh"}
        ours = None
        try:
            triton.wait_ready()
            ours = Server({"CAPSNET_PRECISION": "fp32"}).wait_ready()
            port = int(triton.url.rsplit(":", 1)[1])
            targets = {
                "capsnet-serve": (ours.url, _requests(ours.port), lambda: sum(ours.thread_cpu_seconds())),
                "triton": (f"http://{triton.url}", _requests(port), triton.cpu_seconds),
            }
            for url, reqs, _ in targets.values():
                warm = load(url, reqs, 4, 1.0, 200)
                assert warm.errors == 0 and set(warm.statuses) == {200}, (url, warm.statuses)
            rows = []
            for c in CONCURRENCY:
                for name, (url, reqs, cpu) in targets.items():
                    before = cpu()
                    s = load(url, reqs, c, duration_s, max_requests).summary()
                    s["server_cpu_ms_per_inference"] = round((cpu() - before) * 1000.0 / max(s["requests"], 1), 3)
                    rows.append({"server": name, "concurrency": c, **s})
                    log.info("oip: %s, %d clients: %s", name, c, s)
            return {"duration_s": duration_s, "model_file": "capsnet.onnx (FP32)", "rows": rows}
        finally:
            if ours is not None:
                ours.stop()
            triton.stop()
