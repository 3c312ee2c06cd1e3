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
