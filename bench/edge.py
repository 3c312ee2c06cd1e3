"""What the edge costs: /predict (a PNG digit, multipart, the default precision) straight to the service and through
HAProxy with deploy/edge/haproxy.cfg, at 1 and 16 clients, alternated round by round so a drifting machine shows as
spread rather than as a difference. Needs Debian's `haproxy`; without it the part reports that and measures nothing."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import time
from pathlib import Path

import httpx

from bench.loadgen import load
from bench.payloads import predict_requests
from bench.server import REPO, Server, free_port

log = logging.getLogger("bench.edge")
CONFIG = REPO / "deploy" / "edge" / "haproxy.cfg"
CONCURRENCY = (1, 16)


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
        return {"duration_s": duration_s, "rounds": rounds, "rows": rows}
    finally:
        edge.terminate()
        edge.wait(10)
        server.stop()
