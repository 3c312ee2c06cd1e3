"""One process against several behind the port (CAPSNET_PROCESSES): /predict (28x28 PNG uploads) at 1, 4 and 16 clients,
each run bracketed by the same INT8 file in process at its best batch, so that the ratio carries no drift of the
machine's speed. On a host of 16 cores or more, 8 processes as well."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from bench.loadgen import load
from bench.model import images_per_s, model_files, session
from harness.payloads import predict_requests
from harness.server import Server, group_cpu_seconds

log = logging.getLogger("bench.processes")

CLIENTS = (1, 4, 16)
IN_PROCESS_S = 2.0


def counts(cores: int) -> tuple[int, ...]:
    return (1, 2, 8) if cores >= 16 else (1, 2)


def measure(weights: Path, best_batch: int, duration_s: float = 6.0, max_requests: int = 20000) -> dict:
    cores = len(os.sched_getaffinity(0))
    sess = session(model_files(weights)["int8"])
    out: dict = {"cores": cores, "in_process_batch": best_batch, "duration_s": duration_s, "processes": {}}
    for n in counts(cores):
        server = Server({"CAPSNET_PROCESSES": str(n)}, weights=weights).wait_ready(timeout=120)
        try:
            reqs = predict_requests("127.0.0.1", server.port)
            load(server.url, reqs, 4, 1.0, 200)  # warm-up
            rows = []
            _, before = images_per_s(sess, best_batch, IN_PROCESS_S)
            for clients in CLIENTS:
                cpu = group_cpu_seconds(server.proc.pid)
                r = load(server.url, reqs, clients, duration_s, max_requests).summary()
                cpu = group_cpu_seconds(server.proc.pid) - cpu
                _, after = images_per_s(sess, best_batch, IN_PROCESS_S)
                in_process = (before + after) / 2
                rows.append(
                    {
                        "clients": clients,
                        "requests_per_s": r["throughput_rps"],
                        "p50_ms": r["p50_ms"],
                        "p99_ms": r["p99_ms"],
                        "errors": r["errors"],
                        "cpu_ms_per_request": round(1000 * cpu / max(r["requests"], 1), 3),
                        "in_process_images_per_s": round(in_process, 1),
                        "ratio": round(r["throughput_rps"] / in_process, 3),
                    }
                )
                log.info("%d processes, %d clients: %s", n, clients, rows[-1])
                before = after
            out["processes"][str(n)] = rows
        finally:
            server.stop()
    return out
