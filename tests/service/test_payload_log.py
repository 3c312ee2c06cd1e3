"""service/payload_log.py: a sample of what the models were given and answered, as JSON lines with the request's id."""

from __future__ import annotations

import hashlib
import json

import numpy as np
from fastapi.testclient import TestClient

from service.app import create_app
from service.settings import Settings


def _lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_each_inference_is_a_line_with_its_request_id_inputs_hashed_and_lengths(tmp_path):
    log = tmp_path / "payloads.jsonl"
    pixels = np.zeros((28, 28), np.float32)
    pixels[4:24, 13:16] = 1.0
    with TestClient(create_app(Settings(intra_op_threads=1, warmup_runs=1, payload_log=str(log)))) as c:
        assert c.post("/predict", json={"pixels": pixels.tolist()}, headers={"X-Request-ID": "req-one"}).status_code == 200
        oip = {"inputs": [{"name": "image", "datatype": "FP32", "shape": [1, 1, 28, 28], "data": pixels.ravel().tolist()}]}
        assert c.post("/v2/models/capsnet/infer", json=oip, headers={"X-Request-ID": "req-two"}).status_code == 200
        assert c.get("/healthz").status_code == 200  # no model: no line
    one, two = _lines(log)
    digest = hashlib.sha256(pixels[None, None].tobytes()).hexdigest()
    assert one["request_id"] == "req-one" and one["endpoint"] == "/predict" and one["model"] == "capsnet"
    assert one["inputs"]["image"] == {"shape": [1, 1, 28, 28], "dtype": "float32", "sha256": digest}
    assert len(one["lengths"][0]) == 10 and one["outputs"]["poses"]["shape"] == [1, 10, 16]
    assert two["request_id"] == "req-two" and two["model"] == "capsnet" and two["inputs"]["image"]["sha256"] == digest
    assert "values" not in one["inputs"]["image"]


def test_tensors_in_full_only_when_asked_and_a_share_of_requests_only(tmp_path):
    full, none = tmp_path / "full.jsonl", tmp_path / "none.jsonl"
    body = {"pixels": np.zeros((28, 28)).tolist()}
    with TestClient(create_app(Settings(intra_op_threads=1, warmup_runs=1, payload_log=str(full), payload_log_tensors=True))) as c:
        c.post("/predict", json=body)
    assert np.array(_lines(full)[0]["inputs"]["image"]["values"]).shape == (1, 1, 28, 28)
    with TestClient(create_app(Settings(intra_op_threads=1, warmup_runs=1, payload_log=str(none), payload_log_sample=1e-12))) as c:
        for _ in range(5):
            c.post("/predict", json=body)
    assert _lines(none) == []
    half = tmp_path / "half.jsonl"
    with TestClient(create_app(Settings(intra_op_threads=1, warmup_runs=1, payload_log=str(half), payload_log_sample=0.5))) as c:
        for _ in range(200):
            c.post("/predict", json=body)
    assert 60 <= len(_lines(half)) <= 140  # 100 expected, 7 the standard deviation: a share, neither none nor all


def test_off_by_default(tmp_path, monkeypatch):
    """With the settings' defaults the app opens no payload log, and predictions leave no file behind."""
    for name in ("CAPSNET_PAYLOAD_LOG", "CAPSNET_PAYLOAD_LOG_SAMPLE", "CAPSNET_PAYLOAD_LOG_TENSORS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    with TestClient(create_app(Settings(intra_op_threads=1, warmup_runs=1))) as c:
        assert c.app.state.capsnet.payload_log is None
        assert c.post("/predict", json={"pixels": np.zeros((28, 28)).tolist()}).status_code == 200
    assert list(tmp_path.iterdir()) == []
