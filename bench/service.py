"""The real service over loopback: throughput and latency percentiles at concurrency 1, 4, 16, 64."""
from __future__ import annotations

import os
import resource

from bench.loadgen import load
from bench.payloads import predict_requests, reconstruct_requests
from bench.server import Server

CONCURRENCY = (1, 4, 16, 64)


def _cpu(server: Server) -> dict[str, float]:
    main, other = server.thread_cpu_seconds()
    me = resource.getrusage(resource.RUSAGE_SELF)
    with open("/proc/stat") as f:
        ticks = [int(v) for v in f.readline().split()[1:]]
    return {"event_loop": main, "other_threads": other, "client": me.ru_utime + me.ru_stime,
            "machine_busy": (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK"), "machine_all": sum(ticks) / os.sysconf("SC_CLK_TCK")}


def _cpu_per_request(a: dict[str, float], b: dict[str, float], requests: int) -> dict[str, float]:
    """Where each request's CPU went: the server's event loop (HTTP, parsing, images, JSON), its other threads
    (mostly onnxruntime), and this load generator, which shares the machine; and how busy the machine was."""
    per = lambda k: round(1000.0 * (b[k] - a[k]) / max(requests, 1), 3)  # noqa: E731
    return {"event_loop_ms": per("event_loop"), "other_threads_ms": per("other_threads"), "client_ms": per("client"),
            "machine_busy_fraction": round((b["machine_busy"] - a["machine_busy"]) / max(b["machine_all"] - a["machine_all"], 1e-9), 3)}


def measure(duration_s: float = 8.0, max_requests: int = 20000, precisions: tuple[str, ...] = ("fp32",)) -> dict:
    """Each precision on its own server (CAPSNET_PRECISION), the rest of the settings at their defaults."""
    out: dict = {"duration_s": duration_s, "precisions": {}}
    for precision in precisions:
        out["precisions"][precision] = _measure_one(duration_s, max_requests, {"CAPSNET_PRECISION": precision})
    return out


def _measure_one(duration_s: float, max_requests: int, env: dict[str, str]) -> dict:
    server = Server(env).wait_ready()
    try:
        host, port = "127.0.0.1", server.port
        bodies = {"/predict": predict_requests(host, port), "/reconstruct": reconstruct_requests(host, port)}
        out: dict = {"settings": env, "endpoints": {}}
        for path, reqs in bodies.items():
            load(server.url, reqs, 4, 1.0, 200)  # warm-up
            rows = []
            for c in CONCURRENCY:
                before = _cpu(server)
                r = load(server.url, reqs, c, duration_s, max_requests).summary()
                rows.append({"concurrency": c, **r, "cpu": _cpu_per_request(before, _cpu(server), r["requests"])})
            out["endpoints"][path] = rows
        return out
    finally:
        server.stop()
