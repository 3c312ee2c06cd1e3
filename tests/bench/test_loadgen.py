"""The load generator counts what the server answered and refuses to point anywhere but loopback."""
from __future__ import annotations

import asyncio

import pytest

from bench.loadgen import build_request, run_load


def test_loadgen_refuses_non_loopback_targets():
    with pytest.raises(ValueError, match="loopback"):
        asyncio.run(run_load("http://10.0.0.1:8000", [b""], 1, 0.1, 1))


def test_loadgen_counts_statuses_against_the_real_server(server):
    good = build_request("127.0.0.1", server.port, "/reconstruct", b'{"digit": 1, "pose": [0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]}', "application/json")
    bad = build_request("127.0.0.1", server.port, "/reconstruct", b"nope", "text/plain")
    r = asyncio.run(run_load(server.url, [good, bad], 2, 5.0, 40)).summary()
    assert r["requests"] == 40 and set(r["statuses"]) == {"200", "415"} and sum(r["statuses"].values()) == 40
    assert r["p50_ms"] > 0 and r["p99_ms"] >= r["p50_ms"]


def test_service_cpu_is_split_between_the_event_loop_and_the_model(server):
    from bench.service import _cpu, _cpu_per_request
    from bench.payloads import predict_requests

    before = _cpu(server)
    r = asyncio.run(run_load(server.url, predict_requests("127.0.0.1", server.port, 8), 4, 30.0, 100)).summary()
    cpu = _cpu_per_request(before, _cpu(server), r["requests"])
    assert r["ok"] == r["requests"] == 100
    # PNG uploads: the event loop parses and preprocesses, onnxruntime's threads run the model; both must show
    assert cpu["event_loop_ms"] > 0 and cpu["other_threads_ms"] > 0 and cpu["client_ms"] > 0
    assert 0 < cpu["machine_busy_fraction"] <= 1
