"""The Open Inference Protocol against a real Triton server: nvidia-pytriton's `tritonserver` binary on
127.0.0.1, serving a copy of deploy/triton/model_repository whose models run their ONNX files in the Python backend.

How it is started (the Python backend with tests/triton/model.py in place of the ONNX Runtime backend, which is not on
PyPI): harness/tritonserver.py, which `make bench` uses too. The ONNX Runtime backend itself is exercised only on a real
Triton image. The server runs from its own venv (tests/triton/setup.sh, .triton-venv); without it these tests skip,
unless CAPSNET_REQUIRE_TRITON=1 (as in .ci/run), which fails them.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.http as triton
from google.protobuf import json_format
from tritonclient.grpc import model_config_pb2 as mc

from deploy.triton.config import parse_pbtxt
from harness.server import Server
from harness.tritonserver import COMMITTED, MODELS, TritonServer, TritonUnavailable
from tests.needs import missing
from tests.service.routers.test_oip import (
    CAPSNET_OUTPUT_SIGNATURE,
    CAPSNET_OUTPUTS,
    _capsnet_infer,
    _decoder_inputs,
    _digits,
    _image_input,
    _pbtxt,
    _status,
)


def _missing(reason: str):
    missing("triton", f"{reason}; run tests/triton/setup.sh")


@pytest.fixture(scope="module")
def tritonserver(tmp_path_factory) -> Iterator[str]:
    try:
        server = TritonServer(tmp_path_factory.mktemp("triton"))
    except TritonUnavailable as e:
        _missing(str(e))
    try:
        server.wait_ready()
    except (RuntimeError, TimeoutError) as e:
        pytest.fail(str(e))
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(scope="module")
def client(tritonserver) -> Iterator[triton.InferenceServerClient]:
    with triton.InferenceServerClient(url=tritonserver, network_timeout=60) as c:
        yield c


def _session(model: str) -> ort.InferenceSession:
    return ort.InferenceSession(str((COMMITTED / model / "1" / "model.onnx").resolve()), providers=["CPUExecutionProvider"])


def test_server_and_models_are_live_and_ready(client):
    assert client.is_server_live() and client.is_server_ready()
    for model in MODELS:
        assert client.is_model_ready(model) and client.is_model_ready(model, "1")
    assert not client.is_model_ready("capsnet", "2") and not client.is_model_ready("resnet")
    assert {"binary_tensor_data", "model_configuration", "statistics"} <= set(client.get_server_metadata()["extensions"])


def test_model_metadata_is_the_onnx_graphs_signature(client):
    capsnet = client.get_model_metadata("capsnet")
    assert capsnet["name"] == "capsnet" and capsnet["versions"] == ["1"]
    assert capsnet["inputs"] == [{"name": "image", "datatype": "FP32", "shape": [-1, 1, 28, 28]}]
    assert [(o["name"], o["datatype"], o["shape"]) for o in capsnet["outputs"]] == CAPSNET_OUTPUT_SIGNATURE
    decoder = client.get_model_metadata("decoder", "1")
    assert [i["name"] for i in decoder["inputs"]] == ["digit", "pose"]
    assert decoder["inputs"][1] == {"name": "pose", "datatype": "FP32", "shape": [-1, 16]}
    assert decoder["outputs"] == [{"name": "reconstruction", "datatype": "FP32", "shape": [-1, 1, 28, 28]}]
    assert _status(lambda: client.get_model_metadata("resnet")) == "404"


@pytest.mark.parametrize("model", MODELS)
def test_config_is_the_generated_one(client, model):
    got = json_format.ParseDict(client.get_model_config(model), mc.ModelConfig(), ignore_unknown_fields=True)
    committed = parse_pbtxt(_pbtxt(model))
    assert got.name == model and got.backend == "python"
    assert list(got.input) == list(committed.input) and list(got.output) == list(committed.output)
    assert got.max_batch_size == committed.max_batch_size
    assert got.HasField("dynamic_batching") == committed.HasField("dynamic_batching")


@pytest.mark.parametrize("binary", [False, True], ids=["json", "binary"])
def test_capsnet_equals_onnxruntime(client, binary):
    x = _digits(4)
    result = _capsnet_infer(client, x, binary)
    expected = dict(zip(CAPSNET_OUTPUTS, _session("capsnet").run(CAPSNET_OUTPUTS, {"image": x})))
    for name in CAPSNET_OUTPUTS:
        np.testing.assert_allclose(result.as_numpy(name), expected[name], atol=1e-4, err_msg=name)


@pytest.mark.parametrize("binary", [False, True], ids=["json", "binary"])
def test_decoder_equals_onnxruntime(client, binary):
    rng = np.random.default_rng(16)
    digits = np.array([3, 7, 0], np.int64)
    poses = rng.normal(0, 0.15, (3, 16)).astype(np.float32)
    out = triton.InferRequestedOutput("reconstruction", binary_data=binary)
    got = client.infer("decoder", _decoder_inputs(digits[:, None], poses, binary), outputs=[out]).as_numpy("reconstruction")
    feeds = {i.name: (digits if i.name == "digit" else poses) for i in _session("decoder").get_inputs()}
    expected = _session("decoder").run(["reconstruction"], feeds)[0]
    assert got.shape == (3, 1, 28, 28) and got.dtype == np.float32
    np.testing.assert_allclose(got, expected, atol=1e-4)


def test_errors_are_protocol_errors(client):
    x = np.zeros((2, 1, 27, 28), np.float32)
    assert _status(lambda: client.infer("capsnet", [_image_input(x, True)])) == "400"
    assert _status(lambda: client.infer("resnet", [_image_input(_digits(1), True)])) == "404"


def test_the_front_runs_its_models_on_real_triton(tritonserver):
    """CAPSNET_ENGINE_URL pointed at this tritonserver: the service's own /predict and /reconstruct run there and
    answer as the in-process engine does."""
    from tests.service.engine.test_remote import _digit_png

    local = Server({"CAPSNET_INTRA_OP_THREADS": "1", "CAPSNET_WARMUP_RUNS": "1", "CAPSNET_PRECISION": "fp32"}).wait_ready()
    front = Server({"CAPSNET_ENGINE_URL": f"http://{tritonserver}", "CAPSNET_WARMUP_RUNS": "1"}).wait_ready(timeout=120)

    def inferences(model: str) -> int:  # Triton's own statistics: what it ran, whatever the front says
        return httpx.get(f"http://{tritonserver}/v2/models/{model}/stats", timeout=10).json()["model_stats"][0]["inference_count"]

    try:
        png = _digit_png()
        before = {m: inferences(m) for m in ("capsnet", "decoder")}
        got = httpx.post(front.url + "/predict", files={"file": ("d.png", png, "image/png")}, timeout=60).json()
        assert inferences("capsnet") == before["capsnet"] + 1 and inferences("decoder") > before["decoder"]  # the redraws
        want = httpx.post(local.url + "/predict", files={"file": ("d.png", png, "image/png")}, timeout=60).json()
        assert got["prediction"] == want["prediction"] and got["is_digit"] == want["is_digit"]
        np.testing.assert_allclose(got["lengths"], want["lengths"], atol=1e-4)
        np.testing.assert_allclose(got["recon_errors"], want["recon_errors"], atol=1e-3)
        body = {"digit": got["prediction"], "pose": got["poses"][got["prediction"]]}
        decoded = inferences("decoder")
        drawn = [httpx.post(s.url + "/reconstruct?include=pixels", json=body, timeout=60).json() for s in (front, local)]
        assert inferences("decoder") == decoded + 1
        np.testing.assert_allclose(drawn[0]["reconstruction"]["pixels"], drawn[1]["reconstruction"]["pixels"], atol=1e-3)
        ready = httpx.get(front.url + "/readyz").json()
        assert ready["status"] == "ready" and ready["provider"] == "remote"
    finally:
        front.stop()
        local.stop()


def test_the_two_digit_network_equals_onnxruntime(client):
    """`multimnist` on Triton answers as its ONNX file does in onnxruntime: the same graph, the same names, 36x36."""
    x = np.random.default_rng(36).random((3, 1, 36, 36), dtype=np.float32)
    names = ["lengths", "poses", "reconstructions"]
    result = client.infer("multimnist", [_image_input(x, True)], outputs=[triton.InferRequestedOutput(n, binary_data=True) for n in names])
    expected = dict(zip(names, _session("multimnist").run(names, {"image": x})))
    for name in names:
        np.testing.assert_allclose(result.as_numpy(name), expected[name], atol=1e-4, err_msg=name)
    assert result.as_numpy("reconstructions").shape == (3, 2, 1, 36, 36)
