"""The real service over loopback: throughput and latency percentiles at concurrency 1, 4, 16, 64."""
from __future__ import annotations

import asyncio

from bench.loadgen import run_load
from bench.payloads import predict_requests, reconstruct_requests
from bench.server import Server

CONCURRENCY = (1, 4, 16, 64)


def measure(duration_s: float = 8.0, max_requests: int = 20000, env: dict[str, str] | None = None) -> dict:
    server = Server(env).wait_ready()
    try:
        host, port = "127.0.0.1", server.port
        bodies = {"/predict": predict_requests(host, port), "/reconstruct": reconstruct_requests(host, port)}
        out: dict = {"duration_s": duration_s, "settings": env or {}, "endpoints": {}}
        for path, reqs in bodies.items():
            asyncio.run(run_load(server.url, reqs, 4, 1.0, 200))  # warm-up
            rows = []
            for c in CONCURRENCY:
                r = asyncio.run(run_load(server.url, reqs, c, duration_s, max_requests)).summary()
                rows.append({"concurrency": c, **r})
            out["endpoints"][path] = rows
        return out
    finally:
        server.stop()
