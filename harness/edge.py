"""HAProxy with deploy/edge/haproxy.cfg in front of a service on loopback, started one way for the edge's tests and for
the benchmark of what the edge costs, so that the configuration they judge is the one deployed and not a copy of it."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from harness.server import REPO, free_port

CONFIG = REPO / "deploy" / "edge" / "haproxy.cfg"


def haproxy_binary() -> str | None:
    """Debian's haproxy, on the PATH or where the package puts it (/usr/sbin is not on every user's PATH)."""
    return shutil.which("haproxy") or ("/usr/sbin/haproxy" if Path("/usr/sbin/haproxy").exists() else None)


def start_edge(upstream_port: int, limits: dict[str, str] | None = None) -> tuple[subprocess.Popen[bytes], int]:
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


@contextmanager
def running_edge(upstream_port: int, limits: dict[str, str] | None = None) -> Iterator[int]:
    """start_edge for the length of a `with`: yields its port, and stops it after."""
    proc, port = start_edge(upstream_port, limits)
    try:
        yield port
    finally:
        proc.terminate()
        proc.wait(10)
