"""The real service over loopback: throughput and latency percentiles at concurrency 1, 4, 16, 64."""

from __future__ import annotations

import os
import resource
from pathlib import Path

from bench.loadgen import load
from bench.model import images_per_s, model_files, session
from harness.payloads import predict_requests, reconstruct_requests
from harness.server import Server

CONCURRENCY = (1, 4, 16, 64)
FLOOR_PATH = "/healthz"  # a GET that does nothing: what uvicorn, Starlette and our middleware cost a request


def _cpu(server: Server) -> dict[str, float]:
    main, other = server.thread_cpu_seconds()
    me = resource.getrusage(resource.RUSAGE_SELF)
    with open("/proc/stat") as f:
        ticks = [int(v) for v in f.readline().split()[1:]]
    return {
        "event_loop": main,
        "other_threads": other,
        "client": me.ru_utime + me.ru_stime,
        "machine_busy": (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK"),
        "machine_all": sum(ticks) / os.sysconf("SC_CLK_TCK"),
    }


def _cpu_per_request(a: dict[str, float], b: dict[str, float], requests: int) -> dict[str, float]:
    """Where each request's CPU went: the server's event loop (HTTP, parsing, images, JSON), its other threads
    (mostly onnxruntime), and this load generator, which shares the machine; and how busy the machine was."""
    per = lambda k: round(1000.0 * (b[k] - a[k]) / max(requests, 1), 3)  # noqa: E731
    return {
        "event_loop_ms": per("event_loop"),
        "other_threads_ms": per("other_threads"),
        "client_ms": per("client"),
        "machine_busy_fraction": round((b["machine_busy"] - a["machine_busy"]) / max(b["machine_all"] - a["machine_all"], 1e-9), 3),
    }


PAIRED_CLIENTS = 16  # the service target
PAIRED_BATCH = 32  # when the model table is not at hand; otherwise its best batch for that file
PAIRED_IN_PROCESS_S = 2.0


def measure(
    duration_s: float = 8.0,
    max_requests: int = 20000,
    precisions: tuple[str, ...] = ("fp32",),
    weights: Path | None = None,
    paired_rounds: int = 3,
    paired_batch: dict[str, int] | None = None,
) -> dict:
    """Each precision on its own server (CAPSNET_PRECISION), one worker process (harness.server), the rest of the settings
    at their defaults."""
    out: dict = {"duration_s": duration_s, "cores": len(os.sched_getaffinity(0)), "precisions": {}}
    files = model_files(weights) if weights else {}
    for precision in precisions:
        model_file = files.get(precision)
        batch = (paired_batch or {}).get(precision, PAIRED_BATCH)
        out["precisions"][precision] = _measure_one(
            duration_s, max_requests, {"CAPSNET_PRECISION": precision}, model_file, paired_rounds, batch
        )
    return out


def _measure_one(
    duration_s: float, max_requests: int, env: dict[str, str], model_file: Path | None, paired_rounds: int, paired_batch: int = PAIRED_BATCH
) -> dict:
    server = Server(env, weights=model_file.parent if model_file else None).wait_ready()
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
        out["floor"] = _floor(server, duration_s, max_requests)
        if model_file is not None and paired_rounds:
            out["paired"] = _paired(server, bodies["/predict"], model_file, duration_s, max_requests, paired_rounds, paired_batch)
        return out
    finally:
        server.stop()


def _floor(server: Server, duration_s: float, max_requests: int) -> dict:
    """`GET /healthz` at 16 clients: the event loop's CPU for a request that does no work of its own.

    Why: on a machine the load generator, the event loop and the model share, the service's rate is bounded by the
    CPU each request costs; with the model's share (onnxruntime ms a /predict) and this floor for everything else,
    the report computes the best ratio to the in-process rate that any request path could reach on these cores."""
    get = [f"GET {FLOOR_PATH} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nConnection: keep-alive\r\n\r\n".encode()]
    before = _cpu(server)
    r = load(server.url, get, PAIRED_CLIENTS, duration_s, max_requests * 10).summary()
    return {"path": FLOOR_PATH, "concurrency": PAIRED_CLIENTS, **r, "cpu": _cpu_per_request(before, _cpu(server), r["requests"])}


def _paired(
    server: Server, reqs: list[bytes], model_file: Path, duration_s: float, max_requests: int, rounds: int, batch: int
) -> list[dict]:
    """The service at 16 clients against the same file in process, measured back to back, `rounds` times.

    Why: this machine's speed drifts (in-process INT8 measured 1,172-1,695 images/s within one hour), and the
    model table is taken minutes before the service table; a ratio of two figures from different minutes
    carries that drift. Here each service run is bracketed by in-process runs (the server idle meanwhile: its
    threads do not spin) and divided by their mean, so drift during the pair cancels to first order."""
    sess = session(model_file)
    out = []
    _, before = images_per_s(sess, batch, PAIRED_IN_PROCESS_S)
    for _ in range(rounds):
        r = load(server.url, reqs, PAIRED_CLIENTS, duration_s, max_requests).summary()
        _, after = images_per_s(sess, batch, PAIRED_IN_PROCESS_S)
        in_process = (before + after) / 2
        out.append(
            {
                "in_process_batch": batch,
                "in_process_before": round(before, 1),
                "in_process_after": round(after, 1),
                "in_process_images_per_s": round(in_process, 1),
                "service_rps": r["throughput_rps"],
                "errors": r["errors"],
                "p50_ms": r["p50_ms"],
                "ratio": round(r["throughput_rps"] / in_process, 3),
            }
        )
        before = after
    return out
