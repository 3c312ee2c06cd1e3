"""The real app on the real weights: a TestClient for API tests, a uvicorn subprocess for server tests."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.settings import Settings
from tests.conftest import REPO


@pytest.fixture(scope="session")
def client() -> Iterator[TestClient]:
    with TestClient(create_app(Settings(intra_op_threads=1, warmup_runs=1))) as c:
        yield c


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`python -m service` in a subprocess: the same entry point as the Docker image's CMD."""

    def __init__(self, env: dict[str, str] | None = None, weights: Path | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        e = {k: v for k, v in os.environ.items() if not k.startswith("CAPSNET_")}
        e.update({"CAPSNET_PORT": str(self.port), "CAPSNET_HOST": "127.0.0.1", "CAPSNET_INTRA_OP_THREADS": "1"})
        if weights:
            e["CAPSNET_WEIGHTS_DIR"] = str(weights)
        e.update(env or {})
        self.proc = subprocess.Popen([sys.executable, "-m", "service"], cwd=REPO, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def wait_ready(self, timeout: float = 60.0) -> "Server":
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"service exited {self.proc.returncode}: {self.proc.stdout.read()}")
            try:
                if httpx.get(self.url + "/readyz", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise TimeoutError("service not ready")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> str:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            out, _ = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        return out


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    s = Server().wait_ready()
    yield s
    s.stop()
