"""The remote engine: a front with CAPSNET_ENGINE_URL runs both models on a second instance of this
service over the Open Inference Protocol and answers as that instance does; with the engine gone it answers 503
engine_unavailable with Retry-After within its timeout, not a 500 and not a hang, and /readyz says so."""

from __future__ import annotations

import io
import time
from collections.abc import Iterator

import httpx
import numpy as np
import pytest
from PIL import Image, ImageDraw

from harness.server import Server

ENGINE_TIMEOUT_S = 3.0


def _digit_png() -> bytes:
    """A hand-drawn-looking 7: white ink on black, as MNIST is, then the service's own preprocessing."""
    img = Image.new("L", (56, 56), 0)
    d = ImageDraw.Draw(img)
    d.line([(14, 12), (42, 12)], fill=255, width=5)
    d.line([(42, 12), (24, 46)], fill=255, width=5)
    buf = io.BytesIO()
    img.save(buf, "PNG")
    return buf.getvalue()


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[Server, Server]]:
    # fp32: a front redraws the counterfactuals with the engine's decoder.onnx, as this instance does beside the fp32 network
    # (beside the INT8 one it redraws in INT8: tests/service/engine/test_local.py)
    engine = Server({"CAPSNET_INTRA_OP_THREADS": "1", "CAPSNET_WARMUP_RUNS": "1", "CAPSNET_PRECISION": "fp32"}).wait_ready()
    front = None
    try:
        front = Server(
            {"CAPSNET_ENGINE_URL": engine.url, "CAPSNET_ENGINE_TIMEOUT_S": str(ENGINE_TIMEOUT_S), "CAPSNET_WARMUP_RUNS": "1"}
        ).wait_ready()
        yield engine, front
    finally:
        if front is not None:
            front.stop()
        engine.stop()


def _predict(url: str) -> dict:
    r = httpx.post(url + "/predict", files={"file": ("seven.png", _digit_png(), "image/png")}, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


def test_predict_matches_the_engine(servers: tuple[Server, Server]) -> None:
    engine, front = servers
    local, remote = _predict(engine.url), _predict(front.url)
    assert remote["prediction"] == local["prediction"]
    assert remote["is_digit"] == local["is_digit"] and remote["blank"] == local["blank"]
    np.testing.assert_allclose(remote["lengths"], local["lengths"], atol=1e-4)
    np.testing.assert_allclose(remote["poses"], local["poses"], atol=1e-4)
    np.testing.assert_allclose(remote["recon_errors"], local["recon_errors"], atol=1e-4)
    assert remote["model"]["provider"] == "remote" and remote["model"]["version"] == local["model"]["version"]


def test_decoder_routes_match(servers: tuple[Server, Server]) -> None:
    engine, front = servers
    pose = [0.05 * (k - 8) for k in range(16)]
    perturb = {"digit": 3, "pose": pose, "deltas": [-0.1, 0.0, 0.1]}
    for path, body in (("/reconstruct?include=pixels", {"digit": 3, "pose": pose}), ("/perturb", perturb)):
        a, b = httpx.post(engine.url + path, json=body, timeout=30), httpx.post(front.url + path, json=body, timeout=30)
        assert a.status_code == b.status_code == 200, (a.text, b.text)
        if path.startswith("/reconstruct"):
            np.testing.assert_allclose(b.json()["reconstruction"]["pixels"], a.json()["reconstruction"]["pixels"], atol=1e-3)
        else:
            assert b.json()["grid"]["rows"] == 16 and b.json()["grid"]["cols"] == 3
            assert b.json()["grid"]["png"] == a.json()["grid"]["png"]


def test_model_and_readyz_name_the_engine(servers: tuple[Server, Server]) -> None:
    engine, front = servers
    m = httpx.get(front.url + "/model", timeout=10).json()
    assert m["engine"]["kind"] == "remote" and m["engine"]["url"] == engine.url
    assert m["engine"]["server"]["name"] == "capsnet-serve"
    assert m["provider"] == "remote" and m["input_spec"] == {"name": "image", "type": "tensor(float)", "shape": [None, 1, 28, 28]}
    assert httpx.get(engine.url + "/model", timeout=10).json()["engine"] == {"kind": "local", "counterfactuals": "decoder.onnx"}
    r = httpx.get(front.url + "/readyz", timeout=10)
    assert r.status_code == 200 and r.json()["provider"] == "remote" and r.json()["engine"] == engine.url
    assert httpx.get(front.url + "/v2/health/ready", timeout=10).status_code == 200
    # the front's own /v2 describes the remote graphs as the engine does
    assert httpx.get(front.url + "/v2/models/decoder", timeout=10).json() == httpx.get(engine.url + "/v2/models/decoder", timeout=10).json()


def test_engine_down_is_503_not_a_hang(servers: tuple[Server, Server]) -> None:
    engine, front = servers
    engine.stop()
    # a hang would end in the client's own timeout (an exception), not in this 503
    r = httpx.post(front.url + "/predict", files={"file": ("seven.png", _digit_png(), "image/png")}, timeout=30)
    assert r.status_code == 503, r.text
    assert r.json()["error"] == "engine_unavailable" and r.headers["retry-after"]
    r = httpx.post(front.url + "/reconstruct", json={"digit": 1, "pose": [0.0] * 16}, timeout=30)
    assert r.status_code == 503 and r.json()["error"] == "engine_unavailable" and r.headers["retry-after"]
    time.sleep(1.1)  # past the cached health check
    r = httpx.get(front.url + "/readyz", timeout=10)
    assert r.status_code == 503 and r.json()["status"] == "engine_unavailable" and r.headers["retry-after"]
    assert httpx.get(front.url + "/v2/health/ready", timeout=10).status_code == 503
    assert httpx.get(front.url + "/healthz", timeout=10).status_code == 200


def test_engine_never_ready_stops_start_up() -> None:
    """No engine at the URL: start-up waits CAPSNET_ENGINE_START_TIMEOUT_S, then the process exits saying why."""
    from harness.server import free_port

    s = Server({"CAPSNET_ENGINE_URL": f"http://127.0.0.1:{free_port()}", "CAPSNET_ENGINE_START_TIMEOUT_S": "1"})
    try:
        assert s.proc.wait(timeout=30) != 0
    finally:
        out = s.stop()
    assert "waiting for the engine" in out and "was not ready within 1 s" in out


def test_metadata_of_another_model_is_refused() -> None:
    from service.engine.card import load_card
    from service.engine.remote import EngineMismatch, check_metadata
    from service.settings import ROOT

    card = load_card(ROOT / "weights")
    good = {
        "inputs": [{"name": "digit", "datatype": "INT64", "shape": [-1, 1]}, {"name": "pose", "datatype": "FP32", "shape": [-1, 16]}],
        "outputs": [{"name": "reconstruction", "datatype": "FP32", "shape": [-1, 1, 28, 28]}],
    }
    inputs, _ = check_metadata("decoder", good, card)
    # Triton's [N,1] digit is read as the graph's [N]
    assert [(t.name, t.datatype, t.shape) for t in inputs] == [("digit", "INT64", (-1,)), ("pose", "FP32", (-1, 16))]
    wrong = {**good, "inputs": [good["inputs"][0], {"name": "pose", "datatype": "FP32", "shape": [-1, 8]}]}
    with pytest.raises(EngineMismatch, match="'pose' is FP32 \\[-1, 8\\]"):
        check_metadata("decoder", wrong, card)
