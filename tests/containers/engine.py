"""What the container tests do to a running container: wait for it, ask it, stop it mid-request. The engine itself
(Docker, else podman with the project's containers.conf) is harness.containers.Engine, shared with `make bench`.

Everything is published on 127.0.0.1 only, and every container made here is removed.
"""

from __future__ import annotations

import contextlib
import io
import json
import socket
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator

import numpy as np
from PIL import Image

from harness.containers import CPU_BUILD_ARGS, CPU_IMAGE, GPU_PATH_IMAGE, NO_PYTHON_BASE, Engine, find_engine, wait_ready
from harness.server import free_port
from tests.conftest import MNIST

__all__ = ["CPU_BUILD_ARGS", "CPU_IMAGE", "GPU_PATH_IMAGE", "NO_PYTHON_BASE", "Engine", "find_engine", "wait_ready"]


def mnist_seven_png() -> bytes:
    """MNIST test image 0, a 7, as a PNG upload."""
    from model.data import load_mnist

    images, labels = load_mnist(MNIST, "test")
    assert labels[0] == 7
    buf = io.BytesIO()
    Image.fromarray(images[0]).save(buf, "PNG")
    return buf.getvalue()


def predict(url: str, png: bytes) -> dict:
    boundary = "capsnet-test-boundary"
    body = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="seven.png"\r\nContent-Type: image/png\r\n\r\n'.encode()
        + png
        + f"\r\n--{boundary}--\r\n".encode()
    )
    req = urllib.request.Request(url + "/predict", body, {"Content-Type": f"multipart/form-data; boundary={boundary}"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def in_flight_at_stop(port: int, stop: Callable[[], None]) -> tuple[int, dict]:
    """Start a /predict whose body is half sent, stop the container meanwhile, then send the rest: what it answers.

    The request is in the service's hands (headers read, body arriving) when SIGTERM lands; a graceful stop answers it."""
    body = json.dumps({"pixels": (np.asarray(Image.open(io.BytesIO(mnist_seven_png()))) / 255.0).round(3).tolist()}).encode()
    head = f"POST /predict HTTP/1.1\r\nHost: capsnet\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
        s.sendall(head.encode() + body[: len(body) // 2])
        time.sleep(0.5)
        stopper = threading.Thread(target=stop)
        stopper.start()
        time.sleep(2.0)  # the stop signal has been delivered; the service is shutting down with this request open
        s.sendall(body[len(body) // 2 :])
        raw = b""
        while b"\r\n\r\n" not in raw or len(raw.split(b"\r\n\r\n", 1)[1]) < _length(raw):
            chunk = s.recv(65536)
            if not chunk:
                break
            raw += chunk
        stopper.join(120)
    status = int(raw.split(b" ", 2)[1]) if raw else 0
    return status, json.loads(raw.split(b"\r\n\r\n", 1)[1]) if status else {}


def _length(raw: bytes) -> int:
    head = raw.split(b"\r\n\r\n", 1)[0].decode("latin-1").lower()
    for line in head.split("\r\n"):
        if line.startswith("content-length:"):
            return int(line.split(":", 1)[1])
    return 1 << 30


@contextlib.contextmanager
def container(engine: Engine, image: str, name: str, env: dict[str, str] | None = None, network: str | None = None,
              alias: str | None = None, publish: bool = True) -> Iterator[str]:  # fmt: skip
    """Run `image` detached as `name`, published on 127.0.0.1:<free port> when `publish`; yields the URL (or "")."""
    args = ["run", "-d", "--name", name]
    port = free_port()
    if publish:
        args += ["-p", f"127.0.0.1:{port}:8000"]
    if network:
        args += ["--network", network] + (["--network-alias", alias] if alias else [])
    # one worker process unless asked for more, as harness/server.py starts one: what these tests read of a container (its
    # log, its protocol statistics) is one process's
    for k, v in {"CAPSNET_PROCESSES": "1", **(env or {})}.items():
        args += ["-e", f"{k}={v}"]
    engine("rm", "-f", name, check=False)
    engine(*args, image)
    try:
        yield f"http://127.0.0.1:{port}" if publish else ""
    finally:
        engine("rm", "-f", "-t", "2", name, check=False)


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])
