"""The Open Inference Protocol over gRPC: the stock tritonclient.grpc client (and the generated stub, for typed tensor
contents) against the real service on loopback, answers equal to /v2 over REST for the same inputs, Triton's status
codes for what is refused, the size limit, and the same batcher, statistics and /metrics as REST."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator

import grpc
import httpx
import numpy as np
import pytest
import tritonclient.grpc as tgrpc
import tritonclient.http as thttp
from google.protobuf import json_format
from tritonclient.grpc import model_config_pb2 as mc
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc
from tritonclient.utils import InferenceServerException

from harness.server import REPO, Server, free_port

MAX_BODY = 1 << 20  # a small limit, so that a message over it is quick to send
CAPSNET_OUTPUTS = ["lengths", "poses", "reconstruction", "coupling", "primary"]


class GrpcServer(Server):
    """The service with gRPC on a second free loopback port."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self.grpc_port = free_port()
        super().__init__({"CAPSNET_GRPC_PORT": str(self.grpc_port), **(env or {})})

    @property
    def grpc_url(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"


@pytest.fixture(scope="module")
def server() -> Iterator[GrpcServer]:
    s = GrpcServer({"CAPSNET_INTRA_OP_THREADS": "1", "CAPSNET_MAX_BODY_BYTES": str(MAX_BODY)}).wait_ready()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(server: GrpcServer) -> Iterator[tgrpc.InferenceServerClient]:
    with tgrpc.InferenceServerClient(server.grpc_url) as c:
        yield c


@pytest.fixture(scope="module")
def rest(server: GrpcServer) -> Iterator[thttp.InferenceServerClient]:
    with thttp.InferenceServerClient(f"127.0.0.1:{server.port}", network_timeout=60) as c:
        yield c


@pytest.fixture(scope="module")
def stub(server: GrpcServer) -> Iterator[service_pb2_grpc.GRPCInferenceServiceStub]:
    with grpc.insecure_channel(server.grpc_url) as channel:
        yield service_pb2_grpc.GRPCInferenceServiceStub(channel)


@pytest.fixture(scope="module")
def served(rest: thttp.InferenceServerClient) -> list[str]:
    """The models REST serves under /v2: capsnet and decoder, and the two-digit pair where the card has it."""
    return [m for m in ("capsnet", "decoder", "multimnist", "multimnist-decoder") if rest.is_model_ready(m)]


def _images(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).random((n, 1, 28, 28), dtype=np.float32)


def _decoder_inputs(n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    return rng.integers(0, 10, n).astype(np.int64), rng.uniform(-0.3, 0.3, (n, 16)).astype(np.float32)


def _grpc_input(name: str, x: np.ndarray, datatype: str) -> tgrpc.InferInput:
    return tgrpc.InferInput(name, list(x.shape), datatype).set_data_from_numpy(x)


def _rest_input(name: str, x: np.ndarray, datatype: str) -> thttp.InferInput:
    return thttp.InferInput(name, list(x.shape), datatype).set_data_from_numpy(x, binary_data=True)


def _code(call) -> tuple[str, str]:
    with pytest.raises(InferenceServerException) as e:
        call()
    return e.value.status(), e.value.message()


def _metric(text: str, name: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name))


# ---- health, metadata, configuration ----


def test_live_ready_and_each_model_ready(client, served):
    assert client.is_server_live() and client.is_server_ready()
    assert served[:2] == ["capsnet", "decoder"]
    for model in served:
        assert client.is_model_ready(model) and client.is_model_ready(model, "1")
    assert not client.is_model_ready("resnet") and not client.is_model_ready("capsnet", "2")


def test_server_metadata_is_the_rest_one(client, rest):
    got = json_format.MessageToDict(client.get_server_metadata(), preserving_proto_field_name=True)
    assert got == rest.get_server_metadata()


def test_model_metadata_is_the_rest_one(client, rest, served):
    for model in served:
        got = json_format.MessageToDict(client.get_model_metadata(model), preserving_proto_field_name=True)
        for tensor in got["inputs"] + got["outputs"]:
            tensor["shape"] = [int(d) for d in tensor["shape"]]  # int64 is a string in protobuf's JSON
        assert got == rest.get_model_metadata(model), model
    assert _code(lambda: client.get_model_metadata("resnet"))[0] == "StatusCode.NOT_FOUND"
    assert _code(lambda: client.get_model_metadata("capsnet", "2"))[0] == "StatusCode.NOT_FOUND"


def test_model_config_is_the_rest_one_and_the_repositorys_tensors(client, rest, served):
    """One builder for the three: the ModelConfig over gRPC is the message REST's /config is the JSON of, with the
    tensors deploy/triton's repository declares."""
    for model in served:
        got = client.get_model_config(model).config
        assert got == json_format.ParseDict(rest.get_model_config(model), mc.ModelConfig()), model
        committed = REPO / "deploy" / "triton" / "model_repository" / model / "config.pbtxt"
        if committed.exists():
            from deploy.triton.config import parse_pbtxt

            repo = parse_pbtxt(committed.read_text())
            assert list(got.input) == list(repo.input) and list(got.output) == list(repo.output), model
            assert got.max_batch_size == repo.max_batch_size


# ---- inference: equal to REST /v2 ----


def test_capsnet_equals_rest_v2(client, rest):
    x = _images(4)
    result = client.infer("capsnet", [_grpc_input("image", x, "FP32")], request_id="grpc-1")
    response = result.get_response()
    assert (response.id, response.model_name, response.model_version) == ("grpc-1", "capsnet", "1")
    assert [o.name for o in response.outputs] == CAPSNET_OUTPUTS
    assert len(response.raw_output_contents) == len(CAPSNET_OUTPUTS), "answers are raw, as Triton's"
    expected = rest.infer("capsnet", [_rest_input("image", x, "FP32")])
    for name in CAPSNET_OUTPUTS:
        np.testing.assert_allclose(result.as_numpy(name), expected.as_numpy(name), atol=1e-5, err_msg=name)


def test_only_the_outputs_asked_for(client):
    outputs = [tgrpc.InferRequestedOutput("poses"), tgrpc.InferRequestedOutput("lengths")]
    result = client.infer("capsnet", [_grpc_input("image", _images(2), "FP32")], outputs=outputs)
    assert [o.name for o in result.get_response().outputs] == ["poses", "lengths"]
    assert result.as_numpy("poses").shape == (2, 10, 16)


def test_decoder_equals_rest_v2_with_either_digit_shape(client, rest):
    digits, poses = _decoder_inputs(5)
    expected = rest.infer("decoder", [_rest_input("digit", digits, "INT64"), _rest_input("pose", poses, "FP32")])
    for shaped in (digits, digits[:, None]):  # [N], and Triton's [N, 1]
        result = client.infer("decoder", [_grpc_input("digit", shaped, "INT64"), _grpc_input("pose", poses, "FP32")])
        np.testing.assert_allclose(result.as_numpy("reconstruction"), expected.as_numpy("reconstruction"), atol=1e-5)


def test_typed_contents_equal_raw_contents(client, stub):
    """fp32_contents and int64_contents, as a client without the raw form sends them: the same answers."""
    x = _images(3, seed=5)
    request = pb.ModelInferRequest(model_name="capsnet", id="typed")
    request.inputs.add(name="image", datatype="FP32", shape=x.shape, contents=pb.InferTensorContents(fp32_contents=x.ravel()))
    typed = stub.ModelInfer(request, timeout=30)
    assert typed.id == "typed" and [o.name for o in typed.outputs] == CAPSNET_OUTPUTS
    raw = client.infer("capsnet", [_grpc_input("image", x, "FP32")])
    lengths = np.frombuffer(typed.raw_output_contents[0], "<f4").reshape(3, 10)
    np.testing.assert_allclose(lengths, raw.as_numpy("lengths"), atol=1e-6)

    digits, poses = _decoder_inputs(2)
    request = pb.ModelInferRequest(model_name="decoder")
    request.inputs.add(name="digit", datatype="INT64", shape=[2], contents=pb.InferTensorContents(int64_contents=digits))
    request.inputs.add(name="pose", datatype="FP32", shape=[2, 16], contents=pb.InferTensorContents(fp32_contents=poses.ravel()))
    typed = stub.ModelInfer(request, timeout=30)
    raw = client.infer("decoder", [_grpc_input("digit", digits, "INT64"), _grpc_input("pose", poses, "FP32")])
    np.testing.assert_allclose(np.frombuffer(typed.raw_output_contents[0], "<f4").reshape(2, 1, 28, 28), raw.as_numpy("reconstruction"))


def test_two_digit_network_where_the_card_has_it(client, rest, served):
    assert "multimnist" in served, "the committed card serves the two-digit network"
    x = np.random.default_rng(2).random((2, 1, 36, 36), dtype=np.float32)
    got = client.infer("multimnist", [_grpc_input("image", x, "FP32")])
    expected = rest.infer("multimnist", [_rest_input("image", x, "FP32")])
    np.testing.assert_allclose(got.as_numpy("lengths"), expected.as_numpy("lengths"), atol=1e-5)


# ---- what is refused, with Triton's status codes ----


def test_bad_shapes_datatypes_models_and_outputs_are_refused(client, stub):
    x = _images(1)
    cases = {
        "shape": (
            lambda: client.infer("capsnet", [_grpc_input("image", x.reshape(1, 28, 28), "FP32")]),
            "INVALID_ARGUMENT",
            "unexpected shape",
        ),
        "datatype": (
            lambda: client.infer("capsnet", [_grpc_input("image", x.astype(np.float64), "FP64")]),
            "INVALID_ARGUMENT",
            "data-type",
        ),
        "model": (lambda: client.infer("resnet", [_grpc_input("image", x, "FP32")]), "NOT_FOUND", "unknown model"),
        "version": (lambda: client.infer("capsnet", [_grpc_input("image", x, "FP32")], model_version="2"), "NOT_FOUND", "version 2"),
        "output": (
            lambda: client.infer("capsnet", [_grpc_input("image", x, "FP32")], outputs=[tgrpc.InferRequestedOutput("logits")]),
            "INVALID_ARGUMENT",
            "unexpected inference output",
        ),
        "input": (lambda: client.infer("capsnet", [_grpc_input("pixels", x, "FP32")]), "INVALID_ARGUMENT", "unexpected inference input"),
        "digit": (
            lambda: client.infer(
                "decoder", [_grpc_input("digit", np.array([12]), "INT64"), _grpc_input("pose", np.zeros((1, 16), np.float32), "FP32")]
            ),
            "INVALID_ARGUMENT",
            "digit capsules 0-9",
        ),
        "nan": (lambda: client.infer("capsnet", [_grpc_input("image", np.full_like(x, np.nan), "FP32")]), "INVALID_ARGUMENT", "NaN"),
        "batch": (lambda: client.infer("capsnet", [_grpc_input("image", _images(33), "FP32")]), "INVALID_ARGUMENT", "batch-size"),
    }
    for what, (call, code, words) in cases.items():
        status, message = _code(call)
        assert status == f"StatusCode.{code}" and words in message, (what, status, message)

    request = pb.ModelInferRequest(model_name="capsnet")  # typed values in the wrong field for the data type
    request.inputs.add(name="image", datatype="FP32", shape=[1, 1, 28, 28], contents=pb.InferTensorContents(int_contents=[0] * 784))
    with pytest.raises(grpc.RpcError) as e:
        stub.ModelInfer(request, timeout=30)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "fp32_contents" in e.value.details()


def test_a_message_over_the_size_limit_is_refused(client, server):
    big = _images(32)  # 100 kB: under the limit, served
    assert client.infer("capsnet", [_grpc_input("image", big, "FP32")]).as_numpy("lengths").shape == (32, 10)
    over = np.zeros((MAX_BODY // (28 * 28 * 4) + 1, 1, 28, 28), np.float32)  # past the 1 MiB limit, whatever the batch
    status, message = _code(lambda: client.infer("capsnet", [_grpc_input("image", over, "FP32")]))
    assert status == "StatusCode.RESOURCE_EXHAUSTED", message
    assert client.is_server_ready(), "the refusal costs the service nothing more"


def test_triton_administration_beyond_the_repository_is_unimplemented(client):
    status, message = _code(lambda: client.get_log_settings())
    assert status == "StatusCode.UNIMPLEMENTED" and "LogSettings" in message


# ---- one batcher, one set of statistics, one /metrics ----


def test_statistics_count_grpc_as_rest_does(client, rest):
    before = client.get_inference_statistics("capsnet").model_stats[0]
    client.infer("capsnet", [_grpc_input("image", _images(3), "FP32")])
    after = client.get_inference_statistics("capsnet").model_stats[0]
    assert after.inference_count == before.inference_count + 3 and after.execution_count == before.execution_count + 1
    over_rest = rest.get_inference_statistics("capsnet")["model_stats"][0]
    assert over_rest["inference_count"] == after.inference_count, "one set of counters behind both transports"
    every = client.get_inference_statistics()
    assert [s.name for s in every.model_stats][:2] == ["capsnet", "decoder"]


def test_the_batcher_and_metrics_see_grpc_requests(client, server):
    before = httpx.get(server.url + "/metrics").text
    for _ in range(3):
        client.infer("capsnet", [_grpc_input("image", _images(1), "FP32")])
    _code(lambda: client.infer("resnet", [_grpc_input("image", _images(1), "FP32")]))
    after = httpx.get(server.url + "/metrics").text
    ok = 'capsnet_requests_total{endpoint="/inference.GRPCInferenceService/ModelInfer",method="GRPC",status="OK"}'
    missing = 'capsnet_requests_total{endpoint="/inference.GRPCInferenceService/ModelInfer",method="GRPC",status="NOT_FOUND"}'
    assert _metric(after, ok) - _metric(before, ok) == 3
    assert _metric(after, missing) - _metric(before, missing) == 1
    assert _metric(after, "capsnet_batch_size_count") - _metric(before, "capsnet_batch_size_count") >= 1, "through the batcher"
    predict = 'capsnet_request_predict_seconds_count{endpoint="grpc:/v2/models/capsnet/infer"}'
    assert _metric(after, predict) - _metric(before, predict) == 3, "each phase observed, as REST's are"


# ---- the port ----


def test_grpc_is_off_unless_its_port_is_set():
    """With the settings' defaults the service serves no gRPC: it never even imports its gRPC server."""
    code = (
        "import sys\n"
        "from fastapi.testclient import TestClient\n"
        "from service.app import create_app\n"
        "from service.settings import Settings\n"
        "with TestClient(create_app(Settings(intra_op_threads=1, warmup_runs=1))) as c:\n"
        "    assert c.get('/readyz').status_code == 200\n"
        "print('grpc server loaded:', 'service.oip.grpc_server' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAPSNET_")}
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.splitlines()[-1] == "grpc server loaded: False"


def test_a_port_already_taken_stops_the_service():
    """Not a service that answers REST while its gRPC port belongs to another process."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {"CAPSNET_GRPC_PORT": str(port), "CAPSNET_PORT": str(free_port()), "CAPSNET_INTRA_OP_THREADS": "1"}
        proc = subprocess.run([sys.executable, "-m", "service"], cwd=REPO, env=_env(env), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert re.search(r"cannot listen for gRPC on 127\.0\.0\.1:\d+", proc.stdout + proc.stderr)


def _env(extra: dict[str, str]) -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("CAPSNET_")}
    return {**env, "CAPSNET_HOST": "127.0.0.1", "CAPSNET_PROCESSES": "1", **extra}


def test_grpc_health_says_serving_for_the_server_and_the_inference_service(server):
    """grpc.health.v1, as Kubernetes' gRPC probe and grpc_health_probe ask it: Check for "" and the service by name,
    and Watch's first answer; an unknown service is NOT_FOUND."""
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with grpc.insecure_channel(server.grpc_url) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        for service in ("", "inference.GRPCInferenceService"):
            got = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
            assert got.status == health_pb2.HealthCheckResponse.SERVING, service
        watch = stub.Watch(health_pb2.HealthCheckRequest(service=""), timeout=10)
        assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
        watch.cancel()
        with pytest.raises(grpc.RpcError) as e:
            stub.Check(health_pb2.HealthCheckRequest(service="resnet"), timeout=10)
        assert e.value.code() == grpc.StatusCode.NOT_FOUND


def test_grpc_reflection_lists_and_describes_the_services(server):
    """What grpcurl and Postman do first: list the services and fetch the inference service's descriptor."""
    from google.protobuf import descriptor_pb2
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    with grpc.insecure_channel(server.grpc_url) as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        asks = [
            reflection_pb2.ServerReflectionRequest(list_services=""),
            reflection_pb2.ServerReflectionRequest(file_containing_symbol="inference.GRPCInferenceService"),
        ]
        listed, described = list(stub.ServerReflectionInfo(iter(asks), timeout=10))
    names = {s.name for s in listed.list_services_response.service}
    assert {"inference.GRPCInferenceService", "grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection"} <= names
    files = [descriptor_pb2.FileDescriptorProto.FromString(b) for b in described.file_descriptor_response.file_descriptor_proto]
    methods = {m.name for f in files for s in f.service if s.name == "GRPCInferenceService" for m in s.method}
    assert {"ModelInfer", "ServerReady", "ModelMetadata"} <= methods


def test_grpc_health_says_not_serving_while_http_requests_in_flight_still_drain():
    """SIGTERM with an upload still arriving: health turns NOT_SERVING at once, not once HTTP has drained (up to the
    grace period later), and new gRPC calls are refused from then on, as HTTP takes no new connection: the two drain
    side by side, within one grace period. The upload is still answered."""
    import signal

    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from harness.clients import build_request, multipart_png
    from harness.payloads import digit_pngs

    env = {"CAPSNET_INTRA_OP_THREADS": "1", "CAPSNET_GRACEFUL_TIMEOUT_S": "60", "CAPSNET_BODY_TIMEOUT_S": "60"}
    s = GrpcServer(env).wait_ready()
    try:
        body, content_type = multipart_png(digit_pngs(1)[0])
        request = build_request("127.0.0.1", s.port, "/predict", body, content_type)
        with socket.create_connection(("127.0.0.1", s.port), timeout=60) as upload, grpc.insecure_channel(s.grpc_url) as channel:
            upload.sendall(request[: len(request) // 2])
            watch = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(service=""), timeout=30)
            assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
            s.proc.send_signal(signal.SIGTERM)
            assert next(watch).status == health_pb2.HealthCheckResponse.NOT_SERVING  # the upload is still half sent
            with pytest.raises(grpc.RpcError) as refused:
                service_pb2_grpc.GRPCInferenceServiceStub(channel).ServerLive(pb.ServerLiveRequest(), timeout=10)
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
            upload.sendall(request[len(request) // 2 :])
            answer = b""
            while chunk := upload.recv(65536):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]
        assert b'"prediction"' in answer
        s.proc.wait(60)  # drained and gone
    finally:
        s.stop()


def test_grpc_health_says_not_serving_once_a_drain_begins():
    """SIGTERM: health turns NOT_SERVING for every watcher before the server stops taking calls, so that a balancer
    watching it stops sending first."""
    import signal

    from grpc_health.v1 import health_pb2, health_pb2_grpc

    s = GrpcServer({"CAPSNET_INTRA_OP_THREADS": "1", "CAPSNET_GRACEFUL_TIMEOUT_S": "5"}).wait_ready()
    try:
        with grpc.insecure_channel(s.grpc_url) as channel:
            watch = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(service=""), timeout=60)
            assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
            s.proc.send_signal(signal.SIGTERM)
            assert next(watch).status == health_pb2.HealthCheckResponse.NOT_SERVING
    finally:
        s.stop()
