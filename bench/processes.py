"""One process against several behind the port (CAPSNET_PROCESSES): /predict (28x28 PNG uploads) at 1, 4 and 16 clients.

The servers are all up at once (idle ones cost no CPU: onnxruntime's threads do not spin) and taken in turn, round after
round, each run bracketed by the same INT8 file in process at its best batch, so that the machine's drift falls on all
of them alike and the ratio carries none of it; each cell is the median of the rounds. On a host of 16 cores or more,
8 processes as well."""

from __future__ import annotations

import logging
import os
import statistics
from pathlib import Path

from bench.loadgen import load
from bench.model import images_per_s, model_files, session
from harness.payloads import predict_requests
from harness.server import Server, group_cpu_seconds

log = logging.getLogger("bench.processes")

CLIENTS = (1, 4, 16)
IN_PROCESS_S = 2.0
ROUNDS = 3


def counts(cores: int) -> tuple[int, ...]:
    return (1, 2, 8) if cores >= 16 else (1, 2)


def _median_row(runs: list[dict]) -> dict:
    return {k: runs[0][k] if k == "clients" else round(statistics.median(r[k] for r in runs), 3) for k in runs[0]}


def measure(weights: Path, best_batch: int, duration_s: float = 6.0, max_requests: int = 20000, rounds: int = ROUNDS) -> dict:
    cores = len(os.sched_getaffinity(0))
    sess = session(model_files(weights)["int8"])
    servers = {n: Server({"CAPSNET_PROCESSES": str(n)}, weights=weights) for n in counts(cores)}
    try:
        for server in servers.values():
            server.wait_ready(timeout=120)
        reqs = {n: predict_requests("127.0.0.1", s.port) for n, s in servers.items()}
        for n, server in servers.items():
            load(server.url, reqs[n], 4, 1.0, 200)  # warm-up
        runs: dict[tuple[int, int], list[dict]] = {}
        _, before = images_per_s(sess, best_batch, IN_PROCESS_S)
        for _ in range(rounds):
            for clients in CLIENTS:
                for n, server in servers.items():
                    cpu = group_cpu_seconds(server.proc.pid)
                    r = load(server.url, reqs[n], clients, duration_s, max_requests).summary()
                    cpu = group_cpu_seconds(server.proc.pid) - cpu
                    _, after = images_per_s(sess, best_batch, IN_PROCESS_S)
                    in_process = (before + after) / 2
                    row = {
                        "clients": clients,
                        "requests_per_s": r["throughput_rps"],
                        "p50_ms": r["p50_ms"],
                        "p99_ms": r["p99_ms"],
                        "errors": r["errors"],
                        "cpu_ms_per_request": round(1000 * cpu / max(r["requests"], 1), 3),
                        "in_process_images_per_s": round(in_process, 1),
                        "ratio": round(r["throughput_rps"] / in_process, 3),
                    }
                    runs.setdefault((n, clients), []).append(row)
                    log.info("%d processes, %d clients: %s", n, clients, row)
                    before = after
    finally:
        for server in servers.values():
            server.stop()
    return {
        "cores": cores,
        "in_process_batch": best_batch,
        "duration_s": duration_s,
        "rounds": rounds,
        "processes": {str(n): [_median_row(runs[n, c]) for c in CLIENTS] for n in servers},
        "ratios_by_round": {f"{n}@{c}": [r["ratio"] for r in rs] for (n, c), rs in runs.items()},
    }
