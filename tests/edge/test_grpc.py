"""The Open Inference Protocol over gRPC through the edge (EDGE_GRPC_BIND): stock tritonclient.grpc and health checks
through it, and the slow-client defences on it: connections that send half the HTTP/2 preface and stall are cut at
the header timeout, and one address holding too many connections is refused."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import numpy as np
import pytest
import tritonclient.grpc as tgrpc

from harness.edge import running_edge
from harness.server import free_port
from tests.edge.helpers import need_haproxy
from tests.service.oip.test_grpc_server import GrpcServer

HEADER_TIMEOUT_S = 2
PER_CLIENT = 20


@pytest.fixture(scope="module")
def edge_grpc() -> Iterator[str]:
    need_haproxy()
    service = GrpcServer({"CAPSNET_INTRA_OP_THREADS": "1"}).wait_ready()
    try:
        grpc_port = free_port()
        limits = {
            "EDGE_GRPC_BIND": f"127.0.0.1:{grpc_port}",
            "EDGE_GRPC_UPSTREAM": service.grpc_url,
            "EDGE_HEADER_TIMEOUT": f"{HEADER_TIMEOUT_S}s",
            "EDGE_MAX_CONNECTIONS_PER_CLIENT": str(PER_CLIENT),
        }
        with running_edge(service.port, limits):
            yield f"127.0.0.1:{grpc_port}"
    finally:
        service.stop()


def _infer(url: str) -> np.ndarray:
    with tgrpc.InferenceServerClient(url) as client:
        x = tgrpc.InferInput("image", [1, 1, 28, 28], "FP32")
        x.set_data_from_numpy(np.zeros((1, 1, 28, 28), np.float32))
        return client.infer("capsnet", [x]).as_numpy("lengths")


def test_tritonclient_and_health_through_the_edge(edge_grpc):
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    assert _infer(edge_grpc).shape == (1, 10)
    with grpc.insecure_channel(edge_grpc) as channel:
        status = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""), timeout=10).status
    assert status == health_pb2.HealthCheckResponse.SERVING


def test_half_a_preface_is_cut_at_the_header_timeout_and_others_are_served(edge_grpc):
    host, port = edge_grpc.split(":")
    stalled = []
    t0 = time.monotonic()
    for _ in range(PER_CLIENT - 2):
        s = socket.create_connection((host, int(port)), timeout=30)
        s.sendall(b"PRI * HTTP/2.0\r\n")  # half of the client preface, then nothing
        stalled.append(s)
    try:
        assert _infer(edge_grpc).shape == (1, 10)  # served while they stall
        for s in stalled:  # each is closed by the edge: a bound for a hang (10x the timeout), below the 30 s client timeout
            s.settimeout(10 * HEADER_TIMEOUT_S)
            assert s.recv(1024) == b"" or s.recv(1024) == b""
        assert time.monotonic() - t0 >= HEADER_TIMEOUT_S - 0.5, "cut before the header timeout"
    finally:
        for s in stalled:
            s.close()


def test_one_address_holding_too_many_connections_is_refused(edge_grpc):
    """With the cap's worth of connections held, a further one is closed on arrival. Asked again until the edge has
    counted the held ones (it counts a connection once it has accepted it): a bound, not a measure."""
    host, port = edge_grpc.split(":")
    held = [_connect(host, int(port)) for _ in range(PER_CLIENT)]
    try:
        refused = False
        for _ in range(40):
            try:
                extra = socket.create_connection((host, int(port)), timeout=10)
                extra.settimeout(0.5)
                try:
                    refused = extra.recv(1024) == b""
                finally:
                    extra.close()
            except ConnectionResetError:
                refused = True
            except TimeoutError:
                refused = False
            if refused:
                break
        assert refused, "a connection over the cap was served"
    finally:
        for s in held:
            s.close()


def _connect(host: str, port: int) -> socket.socket:
    """A connection the edge keeps: asked again while the edge still counts connections that were just closed."""
    for _ in range(50):
        try:
            s = socket.create_connection((host, port), timeout=10)
        except ConnectionResetError:
            continue
        s.settimeout(0.1)
        try:
            if s.recv(1) == b"":
                s.close()
                continue
        except TimeoutError:
            s.settimeout(10)
            return s  # open and silent: held
        except ConnectionResetError:
            s.close()
            continue
    raise AssertionError("the edge kept refusing connections under the cap")
