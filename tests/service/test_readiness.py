"""Readiness as Kubernetes expects it, from outside the process (`python -m service`, service/app.py's lifespan): the port
answers while the models load, /healthz 200, and /readyz, /v2/health/ready and every route that needs a model 503 with
Retry-After; a stop while loading ends at once; once warm, all 200.

The order of events is the test, not a clock: the warm-up is made long (CAPSNET_WARMUP_RUNS) so that loading cannot end
before the probes are answered, and the process is stopped while it still loads."""

from __future__ import annotations

import signal
import time
import urllib.error
import urllib.request

import httpx

from harness.server import Server

NEVER_DONE = "1000000"  # warm-up runs: hours, so the service is still loading whatever the machine's load


def _wait_listening(server: Server, limit_s: float = 60.0) -> None:
    """Until the port answers /healthz (a bound for a broken start, not a measure)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        assert server.proc.poll() is None, server.output()[-2000:]
        try:
            with urllib.request.urlopen(server.url + "/healthz", timeout=5) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            time.sleep(0.05)
    raise AssertionError("the port never answered /healthz")


def test_the_port_answers_503_with_retry_after_while_the_models_load_and_a_stop_ends_it():
    server = Server({"CAPSNET_WARMUP_RUNS": NEVER_DONE, "CAPSNET_INTRA_OP_THREADS": "1"})
    try:
        _wait_listening(server)
        with httpx.Client(base_url=server.url, timeout=30) as c:
            ready = c.get("/readyz")
            assert ready.status_code == 503 and ready.headers["retry-after"] == "1" and ready.json()["status"] == "loading"
            v2 = c.get("/v2/health/ready")
            assert v2.status_code == 503 and v2.headers["retry-after"] == "1" and "loading" in v2.json()["error"]
            assert c.get("/v2/health/live").json() == {"live": True}
            predict = c.post("/predict", json={"pixels": [[0.0] * 28] * 28})
            assert predict.status_code == 503 and predict.headers["retry-after"] == "1"
            assert predict.json()["error"] == "not_ready"
            assert c.get("/").status_code == 503
        server.proc.send_signal(signal.SIGTERM)
        server.proc.wait(timeout=30)  # the warm-up is not waited for (a bound for a hang, not a measure)
        assert "Application shutdown complete" in server.output()
    finally:
        server.stop()


def test_once_warm_the_same_routes_answer():
    server = Server({"CAPSNET_WARMUP_RUNS": "1", "CAPSNET_INTRA_OP_THREADS": "1"}).wait_ready()
    try:
        with httpx.Client(base_url=server.url, timeout=30) as c:
            assert c.get("/readyz").json()["status"] == "ready"
            assert c.get("/v2/health/ready").json() == {"ready": True}
            assert c.post("/predict", json={"pixels": [[0.0] * 28] * 28}).status_code == 200
    finally:
        server.stop()


def test_weights_that_fail_to_load_stop_the_process_with_the_start_up_failure_code(tmp_path):
    """A card that names a file the directory lacks: the port has answered, and the process ends with code 3."""
    import json
    import shutil

    from tests.conftest import WEIGHTS

    weights = tmp_path / "weights"
    shutil.copytree(WEIGHTS, weights)
    (weights / "routing.onnx").write_bytes(b"not the file the card names")
    server = Server({"CAPSNET_INTRA_OP_THREADS": "1"}, weights=weights)
    try:
        assert server.proc.wait(timeout=120) == 3
        assert "sha256" in server.output() and "cannot start" in server.output()
        assert json.loads((weights / "model-card.json").read_text())["files"]["routing.onnx"]
    finally:
        server.stop()
