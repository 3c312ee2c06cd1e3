"""What the edge costs: /predict (a PNG digit, multipart, the default precision) straight to the service and through
HAProxy with deploy/edge/haproxy.cfg, at 1 and 16 clients, alternated round by round so a drifting machine shows as
spread rather than as a difference. Then what an attack costs the clients: /predict through the edge, quiet and while
slow clients (bench.attack, renewed as the edge cuts them) hold 3,040 connections, alternated the same way. Needs
Debian's `haproxy`; without it the part reports that and measures nothing."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import time
from pathlib import Path

import httpx

from bench.attack import LOOPBACK_SOURCES, SlowClients
from bench.loadgen import load
from bench.payloads import predict_requests
from bench.server import REPO, Server, free_port, process_cpu_seconds

log = logging.getLogger("bench.edge")
CONFIG = REPO / "deploy" / "edge" / "haproxy.cfg"
CONCURRENCY = (1, 16)
ATTACK = (1500, 20)  # a process's slowloris connections and trickled bodies (bench.attack)
ATTACK_SETTLE_S = 2.0


def haproxy_binary() -> str | None:
    """Debian's haproxy, on the PATH or where the package puts it (/usr/sbin is not on every user's PATH)."""
    return shutil.which("haproxy") or ("/usr/sbin/haproxy" if Path("/usr/sbin/haproxy").exists() else None)


def start_edge(upstream_port: int, limits: dict[str, str] | None = None) -> tuple[subprocess.Popen, int]:
    """HAProxy with deploy/edge/haproxy.cfg on a free loopback port in front of the service at `upstream_port`, EDGE_*
    `limits` over the configuration's defaults; returns once a request through it reaches the service's /readyz. How
    the bench and tests/edge start it."""
    binary = haproxy_binary()
    if binary is None:
        raise RuntimeError("haproxy is not installed (apt-get install haproxy)")
    port = free_port()
    env = {**os.environ, **(limits or {}), "EDGE_BIND": f"127.0.0.1:{port}", "EDGE_UPSTREAM": f"127.0.0.1:{upstream_port}"}
    proc = subprocess.Popen([binary, "-db", "-f", str(CONFIG)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                return proc, port
        except httpx.HTTPError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("HAProxy did not come up")


def measure(duration_s: float = 8.0, rounds: int = 2, max_requests: int = 20000) -> dict:
    if haproxy_binary() is None:
        return {"skipped": "haproxy is not installed (apt-get install haproxy)"}
    server = Server().wait_ready()
    edge, edge_port = start_edge(server.port)
    try:
        targets = {"direct": (server.url, server.port), "edge": (f"http://127.0.0.1:{edge_port}", edge_port)}
        requests = {name: predict_requests("127.0.0.1", port) for name, (_, port) in targets.items()}
        for name, (url, _) in targets.items():
            load(url, requests[name], 4, 1.0, 200)  # warm-up
        rows: list[dict] = []
        for r in range(rounds):
            for c in CONCURRENCY:
                for name, (url, _) in targets.items():
                    s = load(url, requests[name], c, duration_s, max_requests).summary()
                    rows.append({"round": r, "concurrency": c, "path": name, **s})
                    log.info("edge: round %d, %d clients, %s: %s", r, c, name, s)
        return {
            "duration_s": duration_s,
            "rounds": rounds,
            "rows": rows,
            **_under_attack(server, edge, edge_port, duration_s, rounds, max_requests),
        }
    finally:
        edge.terminate()
        edge.wait(10)
        server.stop()


def _under_attack(server: Server, edge: subprocess.Popen, port: int, duration_s: float, rounds: int, max_requests: int) -> dict:
    """Rows of /predict through the edge at `port`, quiet and attacked, each with the CPU seconds the service, the edge
    and the attack spent in it, and what the attack amounted to. The attacking processes share the machine's cores with
    the service and the edge, as they would not in a real attack: their CPU is part of what the attacked rows pay."""
    url, requests = f"http://127.0.0.1:{port}", predict_requests("127.0.0.1", port)
    slowloris, tricklers = ATTACK
    rows: list[dict] = []
    cut = 0

    def cpu() -> tuple[float, float]:
        return sum(server.thread_cpu_seconds()), process_cpu_seconds(edge.pid)

    for r in range(rounds):
        for c in CONCURRENCY:
            before = cpu()
            s = load(url, requests, c, duration_s, max_requests).summary()
            rows.append({"round": r, "concurrency": c, "attack": "none", **s, **_spent(before, cpu(), 0.0)})
            with SlowClients(port, duration_s + ATTACK_SETTLE_S, slowloris, tricklers, renew=True) as attack:
                time.sleep(ATTACK_SETTLE_S)  # every attacking connection is open
                before = cpu()
                s = load(url, requests, c, duration_s, max_requests).summary()
                after = cpu()
            cut += sum(1 for x in attack.closed if x.after_s is not None)
            attack_s = attack.cpu_s * duration_s / (duration_s + ATTACK_SETTLE_S)  # its whole life's CPU, the row's share
            rows.append({"round": r, "concurrency": c, "attack": "slow clients", **s, **_spent(before, after, attack_s)})
            log.info("edge under attack: round %d, %d clients: %s", r, c, rows[-1])
    held = len(LOOPBACK_SOURCES) * (slowloris + tricklers)
    return {"attack": {"connections_held": held, "cut_by_the_server": cut, "settle_s": ATTACK_SETTLE_S}, "attack_rows": rows}


def _spent(before: tuple[float, float], after: tuple[float, float], attack_s: float) -> dict:
    return {
        "service_cpu_s": round(after[0] - before[0], 2),
        "edge_cpu_s": round(after[1] - before[1], 2),
        "attack_cpu_s": round(attack_s, 2),
    }
