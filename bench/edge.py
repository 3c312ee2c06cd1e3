"""What the edge costs: /predict (a PNG digit, multipart, the default precision) straight to the service and through
HAProxy with deploy/edge/haproxy.cfg, at 1 and 16 clients, alternated round by round so a drifting machine shows as
spread rather than as a difference. Then what an attack costs the clients: /predict through the edge, quiet and while
slow clients (harness.attack, renewed as the edge cuts them) hold 3,040 connections, alternated the same way. Needs
Debian's `haproxy`; without it the part reports that and measures nothing."""

from __future__ import annotations

import logging
import subprocess

from bench.loadgen import load
from harness.attack import LOOPBACK_SOURCES, SlowClients
from harness.edge import haproxy_binary, start_edge
from harness.payloads import predict_requests
from harness.server import Server, process_cpu_seconds

log = logging.getLogger("bench.edge")
CONCURRENCY = (1, 16)
ATTACK = (1500, 20)  # a process's slowloris connections and trickled bodies (harness.attack)


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


def _under_attack(server: Server, edge: subprocess.Popen[bytes], port: int, duration_s: float, rounds: int, max_requests: int) -> dict:
    """Rows of /predict through the edge at `port`, quiet and attacked, each with the CPU seconds the service, the edge
    and the attack spent in it, and what the attack amounted to. The attacking processes share the machine's cores with
    the service and the edge, as they would not in a real attack: their CPU is part of what the attacked rows pay."""
    url, requests = f"http://127.0.0.1:{port}", predict_requests("127.0.0.1", port)
    slowloris, tricklers = ATTACK
    rows: list[dict] = []
    cut = 0
    for r in range(rounds):
        for c in CONCURRENCY:
            before = _cpu(server, edge)
            s = load(url, requests, c, duration_s, max_requests).summary()
            rows.append({"round": r, "concurrency": c, "attack": "none", **s, **_spent(before, _cpu(server, edge))})
            with SlowClients(port, duration_s + 1, slowloris, tricklers, renew=True) as attack:
                attack.wait_open()
                before = _cpu(server, edge, attack)
                s = load(url, requests, c, duration_s, max_requests).summary()
                after = _cpu(server, edge, attack)
            cut += sum(1 for x in attack.closed if x.after_s is not None)
            rows.append({"round": r, "concurrency": c, "attack": "slow clients", **s, **_spent(before, after)})
            log.info("edge under attack: round %d, %d clients: %s", r, c, rows[-1])
    held = len(LOOPBACK_SOURCES) * (slowloris + tricklers)
    return {"attack": {"connections_held": held, "cut_by_the_server": cut}, "attack_rows": rows}


def _cpu(server: Server, edge: subprocess.Popen[bytes], attack: SlowClients | None = None) -> tuple[float, float, float]:
    """CPU seconds so far of the service (every thread, ended ones too), the edge and the attack."""
    return process_cpu_seconds(server.proc.pid), process_cpu_seconds(edge.pid), attack.cpu_seconds() if attack else 0.0


def _spent(before: tuple[float, float, float], after: tuple[float, float, float]) -> dict[str, float]:
    """What each party spent between two readings of _cpu, as a row's columns."""
    return {f"{who}_cpu_s": round(b - a, 2) for who, a, b in zip(("service", "edge", "attack"), before, after, strict=True)}
