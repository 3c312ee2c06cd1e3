"""The edge serves the service's internals (/metrics, /model) and its controls (the model repository, over HTTP and
gRPC) only to EDGE_ADMIN_FROM's network (loopback by default): every other client gets 403, and everything else as
before."""

from __future__ import annotations

import json

import httpx
import numpy as np
import pytest
import tritonclient.grpc as tgrpc
from tritonclient.utils import InferenceServerException

from harness.edge import running_edge
from harness.server import free_port
from tests.edge.helpers import need_haproxy, raw_request
from tests.service.oip.test_grpc_server import GrpcServer


def test_internals_and_the_model_repository_only_to_the_admin_network() -> None:
    need_haproxy()
    service = GrpcServer({"CAPSNET_INTRA_OP_THREADS": "1"}).wait_ready()
    try:
        for admin, allowed in ((None, True), ("10.9.8.0/24", False)):  # the tests' client is 127.0.0.1
            grpc_port = free_port()
            env = {"EDGE_GRPC_BIND": f"127.0.0.1:{grpc_port}", "EDGE_GRPC_UPSTREAM": service.grpc_url}
            with running_edge(service.port, {**env, "EDGE_ADMIN_FROM": admin} if admin else env) as port:
                with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as c:
                    for method, path in (("GET", "/metrics"), ("GET", "/model"), ("POST", "/v2/repository/index")):
                        r = c.request(method, path)
                        if allowed:
                            assert r.status_code == 200, path
                        else:
                            assert r.status_code == 403 and r.json()["error"] == "forbidden", path
                    assert c.get("/readyz").status_code == 200 and c.get("/").status_code == 200
                # the same paths percent-encoded, sent as written (a client library may decode them first): the service
                # decodes before it routes, so the edge must too
                for method, path in (("GET", "/%6Detrics"), ("GET", "/%6dodel"), ("POST", "/v2/%72epository/index")):
                    status, body = raw_request(port, method, path)
                    if allowed:
                        assert status == 200, path
                    else:
                        assert status == 403 and json.loads(body)["error"] == "forbidden", path
                with tgrpc.InferenceServerClient(f"127.0.0.1:{grpc_port}") as client:
                    x = tgrpc.InferInput("image", [1, 1, 28, 28], "FP32")
                    x.set_data_from_numpy(np.zeros((1, 1, 28, 28), np.float32))
                    assert client.infer("capsnet", [x]).as_numpy("lengths").shape == (1, 10), "inference for everyone"
                    if allowed:
                        assert {m.name for m in client.get_model_repository_index().models} >= {"capsnet", "decoder"}
                    else:
                        with pytest.raises(InferenceServerException, match="PERMISSION_DENIED"):
                            client.get_model_repository_index()
    finally:
        service.stop()
