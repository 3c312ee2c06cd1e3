"""New weights without downtime (service/loading.py): the model repository extension's load and unload over REST and
gRPC with tritonclient, and SIGHUP, against `python -m service` serving a weights directory of its own."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import signal
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from PIL import Image
from tritonclient.utils import InferenceServerException

from harness.server import Server, free_port
from tests.conftest import WEIGHTS

PIXELS = {"pixels": np.zeros((28, 28)).tolist()}


def weights_dir(tmp_path: Path) -> Path:
    """The committed weights, linked, with a card of its own that a test may change."""
    out = tmp_path / "weights"
    out.mkdir()
    for f in WEIGHTS.iterdir():
        if f.name == "model-card.json":
            (out / f.name).write_text(f.read_text())
        elif f.is_file():
            (out / f.name).symlink_to(f)
    return out


def new_version(weights: Path, suffix: str) -> str:
    """The same files under another version of the card: what a new export looks like to the service."""
    card_path = weights / "model-card.json"
    card = json.loads(card_path.read_text())
    card["version"] = f"{card['version']}-{suffix}"
    card_path.write_text(json.dumps(card))
    return card["version"]


def brighter_decoder(weights: Path, suffix: str) -> str:
    """Another capsnet.onnx (its decoder drawing on a bright ground: sigmoid(b + 3)) under a new version of the card,
    with its sha256: new weights whose every answer tells which version made it."""
    import onnx
    from onnx import numpy_helper

    net = onnx.load(str(WEIGHTS / "capsnet.onnx"))
    for init in net.graph.initializer:
        if init.name == "decoder.net.4.bias":
            init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init) + 3.0, init.name))
    path = weights / "capsnet.onnx"
    path.unlink()
    onnx.save(net, str(path))
    card_path = weights / "model-card.json"
    card = json.loads(card_path.read_text())
    card["files"]["capsnet.onnx"] = {"sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "bytes": path.stat().st_size}
    card_path.write_text(json.dumps(card))
    return new_version(weights, suffix)


def ground(answer: dict) -> float:
    """The reconstruction's mean grey level, which the brighter decoder raises."""
    png = base64.b64decode(answer["reconstruction"]["png"])
    return float(np.asarray(Image.open(io.BytesIO(png)).convert("L"), np.float32).mean() / 255.0)


def version_served(url: str) -> str:
    r = httpx.post(url + "/predict", json=PIXELS, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()["model"]["version"]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    weights = weights_dir(tmp_path_factory.mktemp("reload"))
    grpc_port = free_port()
    env = {"CAPSNET_GRPC_PORT": str(grpc_port), "CAPSNET_INTRA_OP_THREADS": "1", "CAPSNET_PRECISION": "fp32"}  # capsnet.onnx
    server = Server(env, weights=weights).wait_ready(120)
    yield server, weights, grpc_port
    server.stop()


def test_a_load_under_load_swaps_the_weights_with_no_failed_request_and_no_mixed_answer(served):
    """Clients keep sending /predict while the weights directory takes a new capsnet.onnx and its card and a load is
    asked for: every request is answered 200, each wholly by one version (the version it names drew its
    reconstruction); none that began after the load returned is answered by the old one, and none that ended before
    the load was asked for by the new one."""
    server, weights, _ = served
    before = version_served(server.url)
    after = brighter_decoder(weights, "load")
    answers: list[tuple[float, float, int, str, float]] = []  # start, end, status, version, the reconstruction's ground
    stop = threading.Event()

    def client() -> None:
        with httpx.Client(timeout=60) as c:
            while not stop.is_set():
                t0 = time.monotonic()
                r = c.post(server.url + "/predict", json=PIXELS)
                ok = r.status_code == 200
                answers.append(
                    (t0, time.monotonic(), r.status_code, r.json()["model"]["version"] if ok else r.text, ground(r.json()) if ok else 0.0)
                )

    threads = [threading.Thread(target=client) for _ in range(4)]
    for t in threads:
        t.start()
    while len(answers) < 20:  # the load lands among requests in flight
        time.sleep(0.01)
    asked = time.monotonic()
    loaded = httpx.post(server.url + "/v2/repository/models/capsnet/load", timeout=120)
    returned = time.monotonic()
    n = len(answers)
    while len(answers) < n + 20:
        time.sleep(0.01)
    stop.set()
    for t in threads:
        t.join(60)
    assert loaded.status_code == 200, loaded.text
    assert [a for a in answers if a[2] != 200] == [], "no request failed"
    assert {a[3] for a in answers} == {before, after}
    grounds = {version: {round(b, 2) for *_, v, b in answers if v == version} for version in (before, after)}
    assert len(grounds[before]) == len(grounds[after]) == 1 and grounds[before] != grounds[after], grounds  # never a mix
    assert all(v == after for start, _, _, v, _ in answers if start > returned), "once swapped, only the new version answers"
    assert all(v == before for _, end, _, v, _ in answers if end < asked), "and none before it was asked for"


def test_a_failed_load_keeps_the_version_serving_and_says_why(served):
    server, weights, _ = served
    serving = version_served(server.url)
    card_path = weights / "model-card.json"
    good = card_path.read_text()
    card = json.loads(good)
    card["files"]["decoder.onnx"]["sha256"] = "0" * 64  # the file is not the one the card describes
    card["version"] = f"{card['version']}-broken"
    card_path.write_text(json.dumps(card))
    try:
        r = httpx.post(server.url + "/v2/repository/models/capsnet/load", timeout=120)
        assert r.status_code == 400 and "failed to load 'capsnet'" in r.json()["error"] and "sha256" in r.json()["error"], r.text
        assert version_served(server.url) == serving, "the version serving goes on"
        over_grpc = grpcclient.InferenceServerClient(f"127.0.0.1:{served[2]}")
        with pytest.raises(InferenceServerException, match="sha256"):
            over_grpc.load_model("capsnet")
    finally:
        card_path.write_text(good)


def test_overrides_are_refused(served):
    server, _, _ = served
    client = httpclient.InferenceServerClient(server.url.removeprefix("http://"))
    with pytest.raises(InferenceServerException, match="overrides are not supported"):
        client.load_model("capsnet", config=json.dumps({"max_batch_size": 4}))


@pytest.mark.parametrize("transport", ["http", "grpc"])
def test_unload_and_load_with_tritonclient(served, transport):
    server, _, grpc_port = served
    if transport == "http":
        client = httpclient.InferenceServerClient(server.url.removeprefix("http://"))
        index = client.get_model_repository_index
    else:
        client = grpcclient.InferenceServerClient(f"127.0.0.1:{grpc_port}")
        index = lambda: client.get_model_repository_index(as_json=True)["models"]  # noqa: E731
    entries = {m["name"]: m for m in index()}
    assert entries["capsnet"]["state"] == "READY" and entries["decoder"]["state"] == "READY"
    client.unload_model("decoder")
    try:
        assert not client.is_model_ready("decoder") and client.is_model_ready("capsnet"), "only the model named goes"
        entries = {m["name"]: m for m in index()}
        assert entries["decoder"]["state"] == "UNAVAILABLE" and entries["decoder"]["reason"] == "unloaded"
        ready_only = httpx.post(server.url + "/v2/repository/index", json={"ready": True}, timeout=30).json()
        assert "decoder" not in {m["name"] for m in ready_only} and "capsnet" in {m["name"] for m in ready_only}
        with pytest.raises(InferenceServerException, match="has no available versions"):
            client.get_model_metadata("decoder")
        assert httpx.post(server.url + "/predict", json=PIXELS, timeout=30).status_code == 200, "/predict needs capsnet alone"
    finally:
        client.load_model("decoder")
    assert client.is_model_ready("decoder")


def test_predict_answers_503_while_capsnet_is_unloaded(served):
    server, _, _ = served
    assert httpx.post(server.url + "/v2/repository/models/capsnet/unload", timeout=30).status_code == 200
    try:
        r = httpx.post(server.url + "/predict", json=PIXELS, timeout=30)
        assert r.status_code == 503 and "retry-after" in r.headers and "unloaded" in r.json()["detail"], r.text
        assert httpx.get(server.url + "/healthz", timeout=30).status_code == 200
    finally:
        assert httpx.post(server.url + "/v2/repository/models/capsnet/load", timeout=120).status_code == 200
    assert version_served(server.url)


def test_sighup_loads_the_weights_directory_again(served):
    server, weights, _ = served
    before = version_served(server.url)
    after = new_version(weights, "hup")
    server.proc.send_signal(signal.SIGHUP)
    seen = {before}
    for _ in range(600):  # the load runs in the background; requests go on meanwhile, each answered by one version
        seen.add(version := version_served(server.url))
        if version == after:
            break
        time.sleep(0.1)
    assert seen == {before, after}, server.output()[-2000:]
    assert "reloaded" in server.output()


@pytest.mark.parametrize("model", ["capsnet", "multimnist"])
def test_the_weights_version_is_in_each_protocol_answer_and_configuration(served, model):
    server, weights, grpc_port = served
    card = json.loads((weights / "model-card.json").read_text())
    version = card["version"] if model == "capsnet" else card["multimnist"]["version"]
    side = 28 if model == "capsnet" else 36
    rest = httpclient.InferenceServerClient(server.url.removeprefix("http://"))
    image = httpclient.InferInput("image", [1, 1, side, side], "FP32")
    image.set_data_from_numpy(np.zeros((1, 1, side, side), np.float32))
    assert rest.infer(model, [image]).get_response()["parameters"]["weights_version"] == version
    assert rest.get_model_config(model)["parameters"]["weights_version"]["string_value"] == version
    grpc = grpcclient.InferenceServerClient(f"127.0.0.1:{grpc_port}")
    image = grpcclient.InferInput("image", [1, 1, side, side], "FP32")
    image.set_data_from_numpy(np.zeros((1, 1, side, side), np.float32))
    assert grpc.infer(model, [image]).get_response().parameters["weights_version"].string_param == version
    assert grpc.get_model_config(model).config.parameters["weights_version"].string_value == version
