"""Faults: bad weights stop start-up, overload answers 503, SIGTERM drains, a failed batch is one 500."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import threading
import time

import httpx
import numpy as np
import pytest

from harness.server import Server, connections_held, process_cpu_seconds
from tests.conftest import REPO, WEIGHTS


@pytest.fixture
def weights_copy(tmp_path):
    dst = tmp_path / "weights"
    shutil.copytree(WEIGHTS, dst)
    return dst


def _start_fails(weights) -> tuple[int, str]:
    s = Server(weights=weights)
    try:
        code = s.proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        s.stop()
        pytest.fail("service started on broken weights")
    return code, s.output()


def test_missing_weights_stop_startup(weights_copy):
    (weights_copy / "decoder.onnx").unlink()
    code, out = _start_fails(weights_copy)
    assert code != 0 and "weights file missing" in out and "decoder.onnx" in out


def test_truncated_weights_stop_startup(weights_copy):
    p = weights_copy / "capsnet.onnx"
    p.write_bytes(p.read_bytes()[:1_000_000])
    code, out = _start_fails(weights_copy)
    assert code != 0 and "sha256" in out and "capsnet.onnx" in out


def test_tampered_weights_stop_startup(weights_copy):
    p = weights_copy / "capsnet.onnx"
    data = bytearray(p.read_bytes())
    data[-5000] ^= 0xFF  # one flipped bit pattern in a weight: still loads, but is not the model the card describes
    p.write_bytes(bytes(data))
    code, out = _start_fails(weights_copy)
    assert code != 0 and "differs from the model card" in out


def test_missing_card_stops_startup(weights_copy):
    (weights_copy / "model-card.json").unlink()
    code, out = _start_fails(weights_copy)
    assert code != 0 and "model card not found" in out


def test_sigterm_drains_in_flight_requests():
    s = Server().wait_ready()
    rng = np.random.default_rng(0)
    # encoded once, so that the clients send at once
    body = json.dumps({"pixels": (rng.random((64, 28, 28)) < 0.2).astype(float).tolist()}).encode()
    results: list[int] = []

    def call() -> None:
        r = httpx.post(s.url + "/predict/batch", content=body, headers={"Content-Type": "application/json"}, timeout=60)
        results.append(r.status_code)

    threads = [threading.Thread(target=call) for _ in range(4)]
    cpu = process_cpu_seconds(s.proc.pid)
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    # every request in the service's hands or answered (one not yet taken when the drain begins is refused, not lost),
    # and being worked on, not just sent
    while connections_held(s.proc.pid, s.port) + len(results) < 4 or process_cpu_seconds(s.proc.pid) - cpu < 0.2:
        assert time.monotonic() < deadline, "the requests never reached the model"
        time.sleep(0.01)
    s.proc.send_signal(signal.SIGTERM)
    for t in threads:
        t.join(60)
    out = s.stop()
    assert results == [200, 200, 200, 200], out
    # uvicorn re-raises the signal once it has shut down cleanly, so the exit is "by SIGTERM", not a crash
    assert s.proc.returncode in (0, -signal.SIGTERM), out
    assert "capsnet.app: stopped" in out


def test_overload_answers_503_with_retry_after_and_health_stays_up():
    s = Server(env={"CAPSNET_MAX_QUEUE": "64", "CAPSNET_MAX_BATCH": "64"}).wait_ready()
    try:
        body = {"pixels": np.zeros((64, 28, 28)).tolist()}
        statuses: list[int] = []
        retry: list[str] = []
        codes: list[str] = []

        def call() -> None:  # a thread's failed assert would not fail the test: what it saw is checked below
            r = httpx.post(s.url + "/predict/batch", json=body, timeout=60)
            statuses.append(r.status_code)
            if r.status_code == 503:
                retry.append(r.headers.get("retry-after", ""))
                codes.append(r.json()["error"])

        threads = [threading.Thread(target=call) for _ in range(12)]
        for t in threads:
            t.start()
        for _ in range(5):  # the probes answer 200 while the queue overflows
            assert httpx.get(s.url + "/healthz", timeout=60).status_code == 200
            assert httpx.get(s.url + "/readyz", timeout=60).status_code == 200
        for t in threads:
            t.join(60)
        assert 503 in statuses and 200 in statuses and set(statuses) <= {200, 503}
        assert all(r.isdigit() for r in retry) and set(codes) == {"overloaded"}
    finally:
        s.stop()


def test_a_failed_inference_is_one_500_with_an_id_then_service_goes_on(client, caplog):
    batcher = client.app.state.capsnet.batcher
    real = batcher._run
    calls = {"n": 0}

    def flaky(images, busy=False, explain=None, fetch=frozenset()):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("simulated onnxruntime failure")
        return real(images, busy, explain, fetch)

    batcher._run = flaky
    try:
        r = client.post("/predict", json={"pixels": [[0.0] * 28] * 28})
        assert r.status_code == 500 and r.json()["error"] == "inference_failed" and r.json()["id"]
        assert r.json()["id"] in caplog.text
        assert client.post("/predict", json={"pixels": [[0.0] * 28] * 28}).status_code == 200
    finally:
        batcher._run = real


def test_startup_failure_exit_code_is_nonzero_from_the_entry_point(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "service"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={"CAPSNET_WEIGHTS_DIR": str(tmp_path), "CAPSNET_PORT": "0", "CAPSNET_PROCESSES": "1", "PATH": "/usr/bin:/bin"},
    )
    assert r.returncode == 3 and "model card not found" in r.stdout + r.stderr
