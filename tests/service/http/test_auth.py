"""Optional API keys (service/http/auth.py): with a keys file, the models and the internals need a bearer key, the probes
and the page do not; refusals are 401 with a challenge, in the protocol's body under /v2; gRPC asks the same."""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.grpc as tgrpc
import tritonclient.http as thttp
from fastapi.testclient import TestClient
from tritonclient.utils import InferenceServerException

from service.app import create_app
from service.http.auth import KeysError, allowed, bearer, load_keys
from service.settings import Settings
from tests.service.oip.test_grpc_server import GrpcServer

KEY = "k3y-for-the-tests"
PIXELS = {"pixels": np.zeros((28, 28)).tolist()}


@pytest.fixture(scope="module")
def keys_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("keys") / "keys"
    path.write_text(f"# one a line\n\nanother-key\n{KEY}\n")
    return path


@pytest.fixture(scope="module")
def client(keys_file):
    with TestClient(create_app(Settings(intra_op_threads=1, warmup_runs=1, api_keys_file=keys_file))) as c:
        yield c


def test_a_keys_file_is_read_one_key_a_line(keys_file, tmp_path):
    assert load_keys(keys_file) == (b"another-key", KEY.encode())
    (tmp_path / "empty").write_text("# nothing\n\n")
    with pytest.raises(KeysError, match="holds no key"):
        load_keys(tmp_path / "empty")
    with pytest.raises(KeysError, match="unreadable"):
        load_keys(tmp_path / "missing")


def test_only_a_bearer_token_that_is_a_key_passes():
    keys = (b"alpha", b"beta")
    assert bearer("Bearer beta") == b"beta" and bearer(b"bearer  beta ") == b"beta"
    assert bearer("Basic YmV0YQ==") is None and bearer("Bearer ") is None and bearer(None) is None
    assert allowed(b"beta", keys) and not allowed(b"bet", keys) and not allowed(b"betaa", keys) and not allowed(None, keys)


def test_the_models_and_internals_need_a_key(client):
    for method, path, body in (("post", "/predict", PIXELS), ("get", "/model", None), ("get", "/metrics", None)):
        r = client.request(method, path, json=body)
        assert r.status_code == 401 and r.json()["error"] == "unauthorized", path
        assert r.headers["www-authenticate"].startswith("Bearer")
        assert "Authorization: Bearer" in r.json()["detail"]
    wrong = client.post("/predict", json=PIXELS, headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401 and "not one of" in wrong.json()["detail"]
    assert client.post("/predict", json=PIXELS, headers={"Authorization": f"Bearer {KEY}"}).status_code == 200
    assert client.get("/metrics", headers={"Authorization": "Bearer another-key"}).status_code == 200


def test_a_wrong_method_is_told_once_the_key_passes(client):
    """The key is asked before anything else (docs/api.md): a wrong method on a path that needs it is a 401 without the
    key, and the 405 naming the methods with it; on an open path the 405 comes at once."""
    assert client.put("/predict").status_code == 401
    allowed = client.put("/predict", headers={"Authorization": f"Bearer {KEY}"})
    assert allowed.status_code == 405 and allowed.headers["allow"] == "POST"
    assert client.post("/healthz").status_code == 405


def test_the_probes_and_the_page_need_none(client):
    for path in ("/healthz", "/readyz", "/v2/health/live", "/v2/health/ready", "/", "/static/app.js", "/openapi.json", "/dimensions"):
        assert client.get(path).status_code == 200, path
    assert 'id="key-form"' in client.get("/").text  # and the page asks for the key


def test_openapi_says_which_operations_want_a_key_as_the_server_answers_them(client):
    """/openapi.json of a server with keys names the bearer scheme, and documents a 401 (in the body that route
    answers with) exactly on the operations that answer one to a request without a key."""
    schema = client.get("/openapi.json").json()
    assert schema["components"]["securitySchemes"]["apiKey"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "a key of the server's CAPSNET_API_KEYS_FILE",
    }
    checked = 0
    for path, operations in schema["paths"].items():
        if "{" in path:
            continue
        for method, operation in operations.items():
            refused = client.request(method.upper(), path, json={}).status_code == 401
            documented = "401" in operation["responses"]
            assert refused == documented == (operation.get("security") == [{"apiKey": []}]), (method, path)
            if refused:
                ref = operation["responses"]["401"]["content"]["application/json"]["schema"]["$ref"]
                assert ref.endswith("/OIPErrorBody" if path.startswith("/v2") else "/ErrorBody"), (path, ref)
            checked += refused
    assert checked >= 8
    infer = schema["paths"]["/v2/models/{model_name}/infer"]["post"]
    assert infer["responses"]["401"]["content"]["application/json"]["schema"]["$ref"].endswith("/OIPErrorBody")
    assert "401" not in schema["paths"]["/decoders/{sha256}.onnx"]["get"]["responses"]


def test_the_protocol_refuses_in_its_own_body(client):
    r = client.post("/v2/models/capsnet/infer", json={"inputs": []})
    assert r.status_code == 401 and list(r.json()) == ["error"]


def test_without_a_keys_file_nothing_is_asked():
    with TestClient(create_app(Settings(intra_op_threads=1, warmup_runs=1))) as c:
        assert c.post("/predict", json=PIXELS).status_code == 200
        assert 'id="key-form"' not in c.get("/").text


def test_tritonclient_and_grpc_with_and_without_the_key(keys_file):
    server = GrpcServer({"CAPSNET_INTRA_OP_THREADS": "1", "CAPSNET_API_KEYS_FILE": str(keys_file)}).wait_ready()
    image = np.zeros((1, 1, 28, 28), np.float32)
    try:
        with thttp.InferenceServerClient(f"127.0.0.1:{server.port}") as rest:
            x = thttp.InferInput("image", [1, 1, 28, 28], "FP32")
            x.set_data_from_numpy(image)
            with pytest.raises(InferenceServerException, match="API key"):
                rest.infer("capsnet", [x])
            assert rest.infer("capsnet", [x], headers={"Authorization": f"Bearer {KEY}"}).as_numpy("lengths").shape == (1, 10)
            assert rest.is_server_ready()  # a probe: no key
        with tgrpc.InferenceServerClient(server.grpc_url) as grpc_client:
            x = tgrpc.InferInput("image", [1, 1, 28, 28], "FP32")
            x.set_data_from_numpy(image)
            with pytest.raises(InferenceServerException) as e:
                grpc_client.infer("capsnet", [x])
            assert "UNAUTHENTICATED" in str(e.value.status())
            got = grpc_client.infer("capsnet", [x], headers={"authorization": f"Bearer {KEY}"})
            assert got.as_numpy("lengths").shape == (1, 10)
            import grpc
            from grpc_health.v1 import health_pb2, health_pb2_grpc

            with grpc.insecure_channel(server.grpc_url) as channel:
                status = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""), timeout=10).status
            assert status == health_pb2.HealthCheckResponse.SERVING  # Kubernetes' probe needs no key
    finally:
        server.stop()
