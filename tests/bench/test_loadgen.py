"""The load generator counts what the server answered and refuses to point anywhere but loopback."""

from __future__ import annotations

import asyncio

import pytest

from bench.loadgen import run_load
from harness.clients import build_request


def test_loadgen_refuses_non_loopback_targets():
    with pytest.raises(ValueError, match="loopback"):
        asyncio.run(run_load("http://10.0.0.1:8000", [b""], 1, 0.1, 1))


def test_loadgen_counts_statuses_against_the_real_server(server):
    good = build_request(
        "127.0.0.1", server.port, "/reconstruct", b'{"digit": 1, "pose": [0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]}', "application/json"
    )
    bad = build_request("127.0.0.1", server.port, "/reconstruct", b"nope", "text/plain")
    r = asyncio.run(run_load(server.url, [good, bad], 2, 5.0, 40)).summary()
    assert r["requests"] == 40 and set(r["statuses"]) == {"200", "415"} and sum(r["statuses"].values()) == 40
    assert r["p50_ms"] > 0 and r["p99_ms"] >= r["p50_ms"]


def test_service_cpu_is_split_between_the_event_loop_and_the_model(server):
    from bench.service import _cpu, _cpu_per_request
    from harness.payloads import predict_requests

    before = _cpu(server)
    r = asyncio.run(run_load(server.url, predict_requests("127.0.0.1", server.port, 8), 4, 30.0, 100)).summary()
    cpu = _cpu_per_request(before, _cpu(server), r["requests"])
    assert r["ok"] == r["requests"] == 100
    # PNG uploads: the event loop parses and preprocesses, onnxruntime's threads run the model; both must show
    assert cpu["event_loop_ms"] > 0 and cpu["other_threads_ms"] > 0 and cpu["client_ms"] > 0
    assert 0 < cpu["machine_busy_fraction"] <= 1


def test_paired_ratio_divides_each_service_run_by_the_in_process_rates_around_it(server):
    from bench.service import _paired
    from harness.payloads import predict_requests
    from harness.server import REPO

    int8_file = REPO / "weights" / "capsnet-int8.onnx"
    rows = _paired(server, predict_requests("127.0.0.1", server.port, 4), int8_file, duration_s=0.5, max_requests=30, rounds=2, batch=4)
    assert len(rows) == 2
    for r in rows:
        for run in (r, r["v2"]):  # /predict, and the protocol's binary path in the same round
            assert run["in_process_batch"] == 4 and run["in_process_images_per_s"] > 0 and run["errors"] == 0
            assert run["service_rps"] > 0 and run["one_thread_images_per_s"] > 0
            assert abs(run["in_process_images_per_s"] - (run["in_process_before"] + run["in_process_after"]) / 2) <= 0.1
            # from the unrounded rates: the rounded ones shown beside it may move the third decimal by one
            assert abs(run["ratio"] - run["service_rps"] / run["in_process_images_per_s"]) <= 0.0015
            assert abs(run["ratio_one_thread"] - run["service_rps"] / run["one_thread_images_per_s"]) <= 0.0015
        assert r["v2"]["in_process_before"] == r["in_process_after"]  # the in-process run between the two is shared
    assert rows[1]["in_process_before"] == rows[0]["v2"]["in_process_after"]  # one in-process run between two service runs
