"""The Open Inference Protocol: the stock tritonclient (HTTP; JSON and binary tensors) against real uvicorn,
answers equal to /predict and /reconstruct, Triton's error statuses, and raw responses against the protocol's own
OpenAPI schemas (../shared/schemas/open-inference-rest.yaml)."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
import tritonclient.http as triton
import yaml
from fastapi.testclient import TestClient
from google.protobuf import json_format, text_format
from jsonschema import Draft7Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT7
from tritonclient.grpc import model_config_pb2 as mc
from tritonclient.utils import InferenceServerException

from harness.server import Server
from service.app import create_app
from service.settings import Settings
from tests.conftest import committed_pairs
from tests.needs import need_schema

REPO = Path(__file__).resolve().parents[3]

SPEC = REPO.parent / "shared" / "schemas" / "open-inference-rest.yaml"
MNIST = REPO.parent / "shared" / "data" / "mnist"
CAPSNET_OUTPUTS = ["lengths", "poses", "reconstruction", "coupling", "primary"]
# what the capsnet graph gives, as the protocol's metadata states it: (name, datatype, shape)
CAPSNET_OUTPUT_SIGNATURE = [
    ("lengths", "FP32", [-1, 10]),
    ("poses", "FP32", [-1, 10, 16]),
    ("reconstruction", "FP32", [-1, 1, 28, 28]),
    ("coupling", "FP32", [-1, 1152, 10]),
    ("primary", "FP32", [-1, 1152, 8]),
]


@pytest.fixture(scope="module")
def client_v2(server: Server) -> Iterator[triton.InferenceServerClient]:
    with triton.InferenceServerClient(url=f"127.0.0.1:{server.port}", network_timeout=60) as c:
        yield c


def _strokes(n: int) -> np.ndarray:
    """Digit-like drawings: a bar (1), a bar with a top stroke (7), a ring (0), repeated."""
    out = np.zeros((n, 1, 28, 28), np.float32)
    yy, xx = np.mgrid[:28, :28]
    ring = np.abs(np.hypot(yy - 14, (xx - 14) * 1.4) - 8) < 1.6
    for i in range(n):
        kind = i % 3
        if kind == 0:
            out[i, 0, 4:24, 13:16] = 1.0
        elif kind == 1:
            out[i, 0, 5:8, 8:21], out[i, 0, 7:24, 16:19] = 1.0, 1.0
        else:
            out[i, 0][ring] = 1.0
    return out


def _digits(n: int) -> np.ndarray:
    """n MNIST test digits [n,1,28,28] in [0,1] when the data set is here, else drawn ones."""
    try:
        from model.data import load_mnist

        images, _ = load_mnist(MNIST, "test")
        return (images[:n, None] / 255.0).astype(np.float32)
    except (ImportError, OSError, ValueError):
        return _strokes(n)


def _image_input(x: np.ndarray, binary: bool) -> triton.InferInput:
    return triton.InferInput("image", list(x.shape), "FP32").set_data_from_numpy(x, binary_data=binary)


def _capsnet_infer(client: triton.InferenceServerClient, x: np.ndarray, binary: bool) -> triton.InferResult:
    """Every capsnet output asked for, JSON or binary, with a request id: the answer as the protocol shapes it (the
    id echoed, the model and version named, each output in the encoding asked), whichever server gives it."""
    outputs = [triton.InferRequestedOutput(name, binary_data=binary) for name in CAPSNET_OUTPUTS]
    result = client.infer("capsnet", [_image_input(x, binary)], outputs=outputs, request_id="req-7")
    response = result.get_response()
    assert response["id"] == "req-7" and response["model_name"] == "capsnet" and response["model_version"] == "1"
    assert [o["name"] for o in response["outputs"]] == CAPSNET_OUTPUTS
    assert all(("data" in o) != binary and ("binary_data_size" in o.get("parameters", {})) == binary for o in response["outputs"])
    return result


def _decoder_inputs(digits: np.ndarray, poses: np.ndarray, binary: bool) -> list[triton.InferInput]:
    return [
        triton.InferInput("digit", list(digits.shape), "INT64").set_data_from_numpy(digits, binary_data=binary),
        triton.InferInput("pose", list(poses.shape), "FP32").set_data_from_numpy(poses, binary_data=binary),
    ]


def _status(call) -> str:
    with pytest.raises(InferenceServerException) as e:
        call()
    return e.value.status()


# ---- health, metadata, configuration ----


def test_server_and_models_are_live_and_ready(client_v2):
    assert client_v2.is_server_live() and client_v2.is_server_ready()
    for model in ("capsnet", "decoder"):
        assert client_v2.is_model_ready(model) and client_v2.is_model_ready(model, "1")
    assert not client_v2.is_model_ready("capsnet", "2") and not client_v2.is_model_ready("resnet")
    meta = client_v2.get_server_metadata()
    assert meta["name"] == "capsnet-serve" and {"binary_tensor_data", "model_configuration", "statistics"} <= set(meta["extensions"])


def test_model_metadata_is_the_onnx_graphs_signature(client_v2):
    capsnet = client_v2.get_model_metadata("capsnet")
    assert capsnet["name"] == "capsnet" and capsnet["versions"] == ["1"] and capsnet["platform"] == "onnxruntime_onnx"
    assert capsnet["inputs"] == [{"name": "image", "datatype": "FP32", "shape": [-1, 1, 28, 28]}]
    assert [(o["name"], o["datatype"], o["shape"]) for o in capsnet["outputs"]] == CAPSNET_OUTPUT_SIGNATURE
    decoder = client_v2.get_model_metadata("decoder", "1")
    assert decoder["inputs"] == [
        {"name": "digit", "datatype": "INT64", "shape": [-1]},
        {"name": "pose", "datatype": "FP32", "shape": [-1, 16]},
    ]
    assert decoder["outputs"] == [{"name": "reconstruction", "datatype": "FP32", "shape": [-1, 1, 28, 28]}]
    assert _status(lambda: client_v2.get_model_metadata("resnet")) == "404"
    assert _status(lambda: client_v2.get_model_metadata("capsnet", "2")) == "404"


@pytest.mark.parametrize("model", ["capsnet", "decoder"])
def test_config_is_a_triton_model_config_with_the_repositorys_tensors(client_v2, model):
    """Parsed as Triton's own ModelConfig message (unknown fields refused), and its tensors are those deploy/triton
    declares for Triton: a client fits either server."""
    got = json_format.ParseDict(client_v2.get_model_config(model), mc.ModelConfig())
    assert got.name == model and got.platform == "onnxruntime_onnx"
    assert got.max_batch_size == (Settings().max_batch if model == "capsnet" else 656)
    assert got.HasField("dynamic_batching") == (model == "capsnet")
    committed = text_format.Parse(_pbtxt(model), mc.ModelConfig())
    assert list(got.input) == list(committed.input) and list(got.output) == list(committed.output)
    assert got.max_batch_size == committed.max_batch_size


def _pbtxt(model: str) -> str:
    path = REPO / "deploy" / "triton" / "model_repository" / model / "config.pbtxt"
    assert path.exists(), f"{path} is not there: python -m deploy.triton writes it"
    return path.read_text()


# ---- inference: equal to the service's own endpoints ----


@pytest.mark.parametrize("binary", [False, True], ids=["json", "binary"])
def test_capsnet_equals_predict(client_v2, server, binary):
    x = _digits(4)
    result = _capsnet_infer(client_v2, x, binary)
    assert result.as_numpy("coupling").shape == (4, 1152, 10) and result.as_numpy("reconstruction").shape == (4, 1, 28, 28)
    for i in range(len(x)):
        r = httpx.post(server.url + "/predict?include=coupling,pixels", json={"pixels": x[i, 0].tolist()}, timeout=30)
        assert r.status_code == 200, r.text[:300]
        expected = r.json()
        np.testing.assert_allclose(result.as_numpy("lengths")[i], expected["lengths"], atol=1e-4)
        np.testing.assert_allclose(result.as_numpy("poses")[i], expected["poses"], atol=1e-4)
        np.testing.assert_allclose(result.as_numpy("coupling")[i], expected["coupling"], atol=1e-4)
        np.testing.assert_allclose(result.as_numpy("reconstruction")[i, 0], expected["reconstruction"]["pixels"], atol=1e-4)


@pytest.mark.parametrize("binary", [False, True], ids=["json", "binary"])
def test_decoder_equals_reconstruct(client_v2, server, binary):
    rng = np.random.default_rng(16)
    digits = np.array([3, 7, 0], np.int64)
    poses = rng.normal(0, 0.15, (3, 16)).astype(np.float32)
    out = triton.InferRequestedOutput("reconstruction", binary_data=binary)
    got = client_v2.infer("decoder", _decoder_inputs(digits, poses, binary), outputs=[out]).as_numpy("reconstruction")
    assert got.shape == (3, 1, 28, 28) and got.dtype == np.float32
    for i, d in enumerate(digits):
        r = httpx.post(server.url + "/reconstruct?include=pixels", json={"digit": int(d), "pose": poses[i].tolist()}, timeout=30)
        np.testing.assert_allclose(got[i, 0], r.json()["reconstruction"]["pixels"], atol=1e-4)
    # digit as [N, 1], as Triton serves the same graph (dims [1], reshape to []): the same images
    column = client_v2.infer("decoder", _decoder_inputs(digits[:, None], poses, binary), outputs=[out]).as_numpy("reconstruction")
    np.testing.assert_array_equal(column, got)


def test_output_selection_and_the_binary_default(client_v2):
    x = _digits(2)
    only = client_v2.infer("capsnet", [_image_input(x, False)], outputs=[triton.InferRequestedOutput("lengths", binary_data=False)])
    assert [o["name"] for o in only.get_response()["outputs"]] == ["lengths"] and "id" not in only.get_response()
    # no outputs named: tritonclient asks for every output in binary (parameters.binary_data_output)
    every = client_v2.infer("capsnet", [_image_input(x, True)])
    assert [o["name"] for o in every.get_response()["outputs"]] == CAPSNET_OUTPUTS
    np.testing.assert_allclose(every.as_numpy("lengths"), only.as_numpy("lengths"), atol=1e-6)


@pytest.mark.parametrize("algorithm", ["gzip", "deflate"])
def test_compressed_requests(client_v2, algorithm):
    digits, poses = np.array([5], np.int64), np.zeros((1, 16), np.float32)
    plain = client_v2.infer("decoder", _decoder_inputs(digits, poses, True)).as_numpy("reconstruction")
    packed = client_v2.infer("decoder", _decoder_inputs(digits, poses, True), request_compression_algorithm=algorithm)
    np.testing.assert_array_equal(packed.as_numpy("reconstruction"), plain)


def test_capsnet_requests_go_through_the_batcher(client_v2, server):
    def batches() -> float:
        text = httpx.get(server.url + "/metrics", timeout=10).text
        return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith("capsnet_batch_size_count"))

    before = batches()
    client_v2.infer("capsnet", [_image_input(_digits(3), True)], outputs=[triton.InferRequestedOutput("lengths")])
    assert batches() == before + 1


# ---- errors, as Triton answers them ----


def test_errors_carry_tritons_statuses(client_v2):
    x = _digits(1)
    lengths = [triton.InferRequestedOutput("lengths")]
    assert _status(lambda: client_v2.infer("resnet", [_image_input(x, True)])) == "404"
    assert _status(lambda: client_v2.infer("capsnet", [_image_input(x, True)], model_version="3")) == "404"
    wrong_shape = x[:, :, :, :27].copy()
    assert _status(lambda: client_v2.infer("capsnet", [_image_input(wrong_shape, True)], outputs=lengths)) == "400"
    as_fp64 = triton.InferInput("image", list(x.shape), "FP64").set_data_from_numpy(x.astype(np.float64))
    assert _status(lambda: client_v2.infer("capsnet", [as_fp64], outputs=lengths)) == "400"
    misnamed = triton.InferInput("pixels", list(x.shape), "FP32").set_data_from_numpy(x)
    assert _status(lambda: client_v2.infer("capsnet", [misnamed], outputs=lengths)) == "400"
    assert _status(lambda: client_v2.infer("capsnet", [_image_input(x, True)], outputs=[triton.InferRequestedOutput("logits")])) == "400"
    too_many = np.zeros((Settings().max_batch + 1, 1, 28, 28), np.float32)
    assert _status(lambda: client_v2.infer("capsnet", [_image_input(too_many, True)], outputs=lengths)) == "400"
    nan = x.copy()
    nan[0, 0, 3, 3] = np.nan
    assert _status(lambda: client_v2.infer("capsnet", [_image_input(nan, True)], outputs=lengths)) == "400"
    bad_digit = _decoder_inputs(np.array([10], np.int64), np.zeros((1, 16), np.float32), True)
    assert _status(lambda: client_v2.infer("decoder", bad_digit)) == "400"
    unequal = _decoder_inputs(np.array([1, 2], np.int64), np.zeros((3, 16), np.float32), False)
    assert _status(lambda: client_v2.infer("decoder", unequal)) == "400"


def _binary(header: dict, raw: bytes) -> tuple[bytes, dict[str, str]]:
    """A body in the binary tensor data extension: the JSON header, then the raw bytes."""
    head = json.dumps(header).encode()
    return head + raw, {"Inference-Header-Content-Length": str(len(head))}


@pytest.mark.parametrize(
    "body, headers, fragment",
    [
        (b'{"inputs": [', {}, "not valid JSON"),
        (b'{"inputs": []}', {}, "takes exactly the inputs"),
        (json.dumps({"inputs": [{"name": "image", "shape": [0, 1, 28, 28], "datatype": "FP32", "data": []}]}).encode(), {}, "batch-size"),
        (
            json.dumps({"inputs": [{"name": "image", "shape": [1, 1, 28, 28], "datatype": "FP33", "data": [0] * 784}]}).encode(),
            {},
            "invalid datatype",
        ),
        (
            json.dumps({"inputs": [{"name": "image", "shape": [1, 1, 28, 28], "datatype": "FP32", "data": ["a"] * 784}]}).encode(),
            {},
            "FP32 numbers",
        ),
        (
            json.dumps({"inputs": [{"name": "image", "shape": [1, 1, 28, 28], "datatype": "FP32", "data": [0] * 783}]}).encode(),
            {},
            "783 values",
        ),
        (
            *_binary(
                {"inputs": [{"name": "image", "shape": [1, 1, 28, 28], "datatype": "FP32", "parameters": {"binary_data_size": 3136}}]},
                b"\0" * 3135,
            ),
            "3135 bytes of binary data left",
        ),
        (
            *_binary(
                {"inputs": [{"name": "image", "shape": [1, 1, 28, 28], "datatype": "FP32", "parameters": {"binary_data_size": 3136}}]},
                b"\0" * 3137,
            ),
            "1 bytes of binary data after",
        ),
        (b"{}", {"Inference-Header-Content-Length": "9"}, "Inference-Header-Content-Length"),
    ],
    ids=[
        "truncated-json",
        "no-inputs",
        "empty-batch",
        "unknown-datatype",
        "strings",
        "short-data",
        "short-binary",
        "long-binary",
        "header-past-body",
    ],
)
def test_malformed_requests_are_400_in_the_protocols_body(client, body, headers, fragment):
    r = client.post("/v2/models/capsnet/infer", content=body, headers=headers)
    assert r.status_code == 400, r.text[:300]
    assert list(r.json()) == ["error"] and fragment in r.json()["error"], r.json()


def test_a_body_over_the_limit_is_refused_in_the_protocols_body(client):
    r = client.post("/v2/models/decoder/infer", content=b"0" * (Settings().max_body_bytes + 1))
    assert r.status_code == 400 and "byte limit" in r.json()["error"]


def test_loading_is_503_and_an_unknown_model_still_404():
    """Before the lifespan has loaded the model (no `with`: it never starts): liveness yes, readiness no."""
    c = TestClient(create_app(Settings()))
    assert c.get("/v2/health/live").status_code == 200
    for path in ("/v2/health/ready", "/v2/models/capsnet/ready", "/v2/models/decoder"):
        r = c.get(path)
        assert r.status_code == 503 and "loading" in r.json()["error"] and r.headers["retry-after"] == "1", path
    r = c.post("/v2/models/capsnet/infer", json={"inputs": []})
    assert r.status_code == 503 and list(r.json()) == ["error"]
    assert c.get("/v2/models/resnet").status_code == 404


def test_a_batch_larger_than_the_queue_is_an_invalid_argument_not_a_retry():
    """A full queue is a 503 to retry (tests/service/test_faults.py); a batch that could never fit says how many would."""

    def infer(c: TestClient, n: int):
        body = {"inputs": [{"name": "image", "shape": [n, 1, 28, 28], "datatype": "FP32", "data": [0.0] * (n * 784)}]}
        return c.post("/v2/models/capsnet/infer", json=body)

    with TestClient(create_app(Settings(max_queue=1, intra_op_threads=1, warmup_runs=0))) as c:
        r = infer(c, 2)
        assert r.status_code == 400 and "retry-after" not in r.headers
        assert r.json()["error"].startswith("2 images in one request, more than the model's queue holds (1, CAPSNET_MAX_QUEUE)")
        assert infer(c, 1).status_code == 200


# ---- statistics ----


def test_statistics_count_what_was_served(client_v2):
    def decoder_stats() -> dict:
        stats = client_v2.get_inference_statistics("decoder")["model_stats"]
        assert [(s["name"], s["version"]) for s in stats] == [("decoder", "1")]
        return stats[0]

    before = decoder_stats()
    client_v2.infer("decoder", _decoder_inputs(np.array([1, 2], np.int64), np.zeros((2, 16), np.float32), True))
    with pytest.raises(InferenceServerException):
        client_v2.infer("decoder", _decoder_inputs(np.array([11], np.int64), np.zeros((1, 16), np.float32), True))
    after = decoder_stats()
    assert after["inference_count"] == before["inference_count"] + 2 and after["execution_count"] == before["execution_count"] + 1
    s, b = after["inference_stats"], before["inference_stats"]
    assert s["success"]["count"] == b["success"]["count"] + 1 and s["success"]["ns"] > b["success"]["ns"]
    assert s["fail"]["count"] == b["fail"]["count"] + 1
    assert s["compute_infer"]["count"] == s["success"]["count"] and after["last_inference"] >= max(before["last_inference"], 1)
    assert any(x["batch_size"] == 2 for x in after["batch_stats"])
    every = client_v2.get_inference_statistics()["model_stats"]
    pairs = {"multimnist", "multimnist-decoder"} if committed_pairs() else set()  # served where the card has them
    assert {s["name"] for s in every} == {"capsnet", "decoder"} | pairs
    assert _status(lambda: client_v2.get_inference_statistics("resnet")) == "404"


# ---- raw responses against the protocol's OpenAPI schemas ----


@pytest.fixture(scope="module")
def protocol() -> dict:
    return yaml.safe_load(need_schema(SPEC.name).read_text())


def _strict(spec: dict, binary_outputs: bool = False) -> dict:
    """The spec with unknown fields refused wherever it lists the fields (a misspelt `model_version` fails), and, for a
    response whose outputs are binary, `data` optional (the schemas' README: the spec requires it, the extension drops it)."""
    spec = copy.deepcopy(spec)
    for schema in spec["components"]["schemas"].values():
        if "properties" in schema:
            schema.setdefault("additionalProperties", False)
    if binary_outputs:
        spec["components"]["schemas"]["response_output"]["required"].remove("data")
    return spec


def _check(spec: dict, name: str, document: object) -> None:
    registry = Registry().with_resource("urn:oip", Resource(contents=spec, specification=DRAFT7))
    validator = Draft7Validator({"$ref": f"urn:oip#/components/schemas/{name}"}, registry=registry)
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message[:200]}" for e in validator.iter_errors(document)]
    assert not errors, f"{name}: {errors[:5]}"


def test_raw_responses_match_the_protocol_schemas(server, protocol):
    strict = _strict(protocol)
    url = server.url
    _check(strict, "metadata_server_response", httpx.get(url + "/v2", timeout=10).json())
    for model in ("capsnet", "decoder"):
        _check(strict, "metadata_model_response", httpx.get(f"{url}/v2/models/{model}", timeout=10).json())
    request = {
        "id": "x1",
        "inputs": [
            {"name": "digit", "shape": [2], "datatype": "INT64", "data": [4, 9]},
            {"name": "pose", "shape": [2, 16], "datatype": "FP32", "data": [[0.05] * 16, [-0.05] * 16]},
        ],
    }
    _check(strict, "inference_request", request)
    r = httpx.post(url + "/v2/models/decoder/infer", json=request, timeout=30)
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    _check(strict, "inference_response", r.json())
    assert r.json()["outputs"][0]["shape"] == [2, 1, 28, 28] and len(r.json()["outputs"][0]["data"]) == 2 * 784

    r = httpx.post(url + "/v2/models/decoder/infer", json={**request, "parameters": {"binary_data_output": True}}, timeout=30)
    assert r.headers["content-type"] == "application/octet-stream"
    n = int(r.headers["inference-header-content-length"])
    header = json.loads(r.content[:n])
    _check(_strict(protocol, binary_outputs=True), "inference_response", header)
    assert header["outputs"][0]["parameters"]["binary_data_size"] == len(r.content) - n == 2 * 784 * 4

    for path, call in [
        ("/v2/models/resnet", lambda p: httpx.get(url + p, timeout=10)),
        ("/v2/models/decoder/infer", lambda p: httpx.post(url + p, json={"inputs": "x"}, timeout=10)),
    ]:
        r = call(path)
        assert r.status_code in (400, 404)
        _check(strict, "inference_error_response", r.json())
        assert list(r.json()) == ["error"]


def test_openapi_documents_the_v2_routes(client):
    spec = client.get("/openapi.json").json()
    infer = spec["paths"]["/v2/models/{model_name}/infer"]["post"]
    assert infer["tags"] == ["open inference protocol"]
    assert {"application/json", "application/octet-stream"} <= set(infer["requestBody"]["content"])
    assert "$defs" not in json.dumps(infer)  # inlined: a $ref into $defs would point nowhere in this document
    for path in (
        "/v2",
        "/v2/health/live",
        "/v2/health/ready",
        "/v2/models/{model_name}",
        "/v2/models/{model_name}/ready",
        "/v2/models/{model_name}/config",
        "/v2/models/{model_name}/stats",
        "/v2/models/stats",
        "/v2/models/{model_name}/versions/{model_version}/infer",
    ):
        assert path in spec["paths"], path


def test_the_v2_routes_document_the_400_they_answer_not_fastapis_422(client):
    """A request that fails the protocol routes' own validation (a header that is no number) is answered 400 in the
    protocol's body, and the OpenAPI document lists no 422 on any /v2 route, as it does on the service's own."""
    r = client.post("/v2/models/capsnet/infer", content=b"{}", headers={"Inference-Header-Content-Length": "two"})
    assert r.status_code == 400 and list(r.json()) == ["error"], r.text[:300]
    spec = client.get("/openapi.json").json()
    v2 = {p: ops for p, ops in spec["paths"].items() if p.startswith("/v2")}
    assert len(v2) >= 15
    assert [p for p, ops in v2.items() for op in ops.values() if "422" in op["responses"]] == []
    assert "422" in spec["paths"]["/predict"]["post"]["responses"]


def test_kserves_own_rest_client_reads_health_and_readiness(server):
    """The KServe SDK's InferenceRESTClient (protocol v2) reads the health bodies as the KServe v2 REST protocol has
    them: {"live": true}, {"ready": true}, {"name": ..., "ready": true}. In a process of its own, as its users run it:
    kserve's and tritonclient's generated protos share the package name `inference` and cannot load into one process."""
    import subprocess
    import sys

    script = f"""
import asyncio
from kserve import InferenceRESTClient, RESTConfig

async def ask():
    client = InferenceRESTClient(RESTConfig(protocol="v2", retries=0, timeout=30))
    try:
        return [await client.is_server_live("{server.url}"), await client.is_server_ready("{server.url}"),
                await client.is_model_ready("{server.url}", "capsnet"), await client.is_model_ready("{server.url}", "decoder")]
    finally:
        await client.close()

print(asyncio.run(ask()))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[True, True, True, True]"


def test_a_method_or_path_the_protocol_does_not_take_is_answered_in_its_body(client):
    """Under /v2 even the router's own 405 and 404 are the protocol's {"error": message}, as a protocol client parses."""
    r = client.delete("/v2/models/capsnet")
    assert r.status_code == 405 and r.json() == {"error": "/v2/models/capsnet takes GET or HEAD, not DELETE"}
    assert r.headers["allow"] == "GET, HEAD"
    r = client.get("/v2/models/capsnet/nothing")
    assert r.status_code == 404 and list(r.json()) == ["error"]
    assert client.delete("/predict").json()["error"] == "method_not_allowed"  # the REST API keeps its own
