"""The real service over loopback: throughput and latency percentiles at concurrency 1, 4, 16, 64."""

from __future__ import annotations

import os
import resource
from pathlib import Path

from bench.loadgen import load
from bench.model import images_per_s, model_files, session
from harness.payloads import oip_binary_requests, predict_requests, reconstruct_requests, tensor_images
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
    """The service at 16 clients against the same file in process, measured back to back, `rounds` times: `/predict`
    (the uploads `reqs`), then the Open Inference Protocol's binary path (`v2`), each run between two in-process runs.

    Why bracketed: this machine's speed drifts (in-process INT8 measured 1,172-1,695 images/s within one hour), and the
    model table is taken minutes before the service table; a ratio of two figures from different minutes carries that
    drift. Here each service run is divided by the mean of the in-process runs just before and after it (the server idle
    meanwhile: its threads do not spin), so drift during the pair cancels to first order.

    Why the protocol's path and one thread too: /v2 with binary tensors does no image work (no decoding, preprocessing,
    redrawing or answer to build), so its ratio is what the service's HTTP, batching and model reach without any of
    the front's image work; and under load the service runs its batches on one thread (CAPSNET_INTRA_OP_THREADS_BUSY),
    leaving the event loop a core, so the one-thread rate in process is what its model has to give."""
    sess, one = session(model_file), session(model_file, threads=1)

    def rates() -> tuple[float, float]:
        return images_per_s(sess, batch, PAIRED_IN_PROCESS_S)[1], images_per_s(one, batch, PAIRED_IN_PROCESS_S)[1]

    def row(r: dict, before: tuple[float, float], after: tuple[float, float]) -> dict:
        both, single = (before[0] + after[0]) / 2, (before[1] + after[1]) / 2
        return {
            "in_process_batch": batch,
            "in_process_before": round(before[0], 1),
            "in_process_after": round(after[0], 1),
            "in_process_images_per_s": round(both, 1),
            "one_thread_images_per_s": round(single, 1),
            "service_rps": r["throughput_rps"],
            "errors": r["errors"],
            "p50_ms": r["p50_ms"],
            "ratio": round(r["throughput_rps"] / both, 3),
            "ratio_one_thread": round(r["throughput_rps"] / single, 3),
        }

    v2 = oip_binary_requests(server.port, tensor_images())
    load(server.url, v2, 4, 1.0, 200)  # warm-up
    out = []
    before = rates()
    for _ in range(rounds):
        r = load(server.url, reqs, PAIRED_CLIENTS, duration_s, max_requests).summary()
        middle = rates()
        predict = row(r, before, middle)
        r = load(server.url, v2, PAIRED_CLIENTS, duration_s, max_requests).summary()
        after = rates()
        out.append({**predict, "v2": row(r, middle, after)})
        before = after
    return out
