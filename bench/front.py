"""The front's CPU a request: what the HTTP and gRPC front spends on each request around the model, request kind by
request kind, beside `GET /healthz` and beside an 18-line FastAPI server a user might write instead (../shared/peers).

On a GPU host the model costs a fraction of a millisecond an image, and what sets the rate is this: the CPU the
process spends on each request outside the model's own threads. The service runs here with one onnxruntime thread a
session, so all of the model's work is on its batcher threads, named `capsnet-infer-*` (service/threads.py), and each
request's CPU is read from /proc per thread (harness.server.cpu_by_role): the event loop, the model, the decode pool,
and the rest; the front is the process less the model. Every kind runs at CLIENTS keep-alive clients for the same time.
"""

from __future__ import annotations

import base64
import contextlib
import io
import logging
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import numpy as np
from PIL import Image, ImageDraw

from bench import loop_profile
from bench.grpc import _grpc_messages, grpc_load
from bench.loadgen import Result, load
from harness.clients import build_request, multipart_png
from harness.payloads import browser_png, digit_pngs, oip_binary_requests, tensor_images
from harness.server import REPO, Server, cpu_by_role, free_port

log = logging.getLogger("bench.front")

CLIENTS = 8
PEER = REPO.parent / "shared" / "peers" / "naive_fastapi.py"


def _get(port: int, path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: keep-alive\r\n\r\n".encode()


def _canvas_png(png: bytes) -> bytes:
    """A digit as the page's canvas exports it: 280x280, the ink in the alpha channel of a transparent ground, drawn
    with a round pen over the digit's strokes (10x the MNIST digit)."""
    digit = np.asarray(Image.open(io.BytesIO(png)).convert("L"))
    canvas = Image.new("RGBA", (280, 280), (0, 0, 0, 0))
    pen = ImageDraw.Draw(canvas)
    for r, c in zip(*np.nonzero(digit < 128), strict=True):
        pen.ellipse((c * 10 - 6, r * 10 - 6, c * 10 + 16, r * 10 + 16), fill=(20, 20, 20, 255))
    return browser_png(np.asarray(canvas))


def _kinds(port: int) -> dict[str, list[bytes]]:
    """Each kind of request, as bytes on the wire: a few of each, sent in turn."""
    pngs = digit_pngs(16)
    canvas = [_canvas_png(p) for p in pngs[:8]]
    pixels = [np.asarray(Image.open(io.BytesIO(p)).convert("L"), np.float32) for p in pngs]
    return {
        "GET /healthz": [_get(port, "/healthz")],
        "/predict, 28x28 PNG (multipart)": [build_request("127.0.0.1", port, "/predict", *multipart_png(p)) for p in pngs],
        "/predict, 280x280 PNG (multipart)": [build_request("127.0.0.1", port, "/predict", *multipart_png(p)) for p in canvas],
        "/predict, the page's canvas (JSON, source canvas)": [
            build_request(
                "127.0.0.1",
                port,
                "/predict",
                b'{"source": "canvas", "image": "data:image/png;base64,' + base64.b64encode(p) + b'"}',
                "application/json",
            )
            for p in canvas
        ],
        "/predict, pixels (JSON)": [
            build_request(
                "127.0.0.1", port, "/predict", b'{"pixels": ' + str(np.round(1 - x / 255, 3).tolist()).encode() + b"}", "application/json"
            )
            for x in pixels
        ],
        "/v2 capsnet, binary tensors": oip_binary_requests(port, tensor_images(16)),
    }


def _per_request(before: dict[str, float], after: dict[str, float], requests: int) -> dict[str, float]:
    per = {k: round(1000.0 * (after[k] - before[k]) / max(requests, 1), 3) for k in before}
    per["front"] = round(per["process"] - per["engine"], 3)
    return per


def _row(pid: int, run: Callable[[], Result]) -> dict:
    before = cpu_by_role(pid)
    r = run().summary()
    cpu = _per_request(before, cpu_by_role(pid), r["requests"])
    return {
        "requests_per_s": r["throughput_rps"],
        "p50_ms": r["p50_ms"],
        "errors": r["errors"],
        "event_loop_ms": cpu["event_loop"],
        "front_ms": cpu["front"],
        "model_ms": cpu["engine"],
        "process_ms": cpu["process"],
    }


PROFILED = "/predict, 28x28 PNG (multipart)"


def _loop_profile(server: Server, requests: list[bytes], duration_s: float, max_requests: int) -> dict | None:
    """py-spy on the event loop while the same clients send `PROFILED` (bench/loop_profile.py): a run of its own, after
    the table's, since the sampler takes some of the machine."""
    if loop_profile.py_spy() is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "loop.txt"
        spy = loop_profile.record(server.proc.pid, duration_s, out)
        before = cpu_by_role(server.proc.pid)
        r = load(server.url, requests, CLIENTS, duration_s + 1.0, max_requests).summary()
        after = cpu_by_role(server.proc.pid)
        spy.wait(60)
        counts = loop_profile.main_thread_phases(out.read_text()) if out.exists() else None
    if not counts:
        return None
    loop_ms = 1000.0 * (after["event_loop"] - before["event_loop"]) / max(r["requests"], 1)
    return {
        "request": PROFILED,
        "samples": sum(counts.values()),
        "loop_ms": round(loop_ms, 3),
        "phases": loop_profile.table(counts, loop_ms),
    }


def _service(duration_s: float, max_requests: int) -> tuple[dict[str, dict], dict | None]:
    grpc_port = free_port()
    server = Server({"CAPSNET_INTRA_OP_THREADS": "1", "CAPSNET_GRPC_PORT": str(grpc_port)}).wait_ready()
    try:
        rows = {}
        for kind, requests in _kinds(server.port).items():
            rows[kind] = _row(server.proc.pid, lambda r=requests: load(server.url, r, CLIENTS, duration_s, max_requests))
            log.info("service %s: %s", kind, rows[kind])
        messages = _grpc_messages(tensor_images(16))
        rows["gRPC capsnet"] = _row(
            server.proc.pid, lambda: grpc_load(f"127.0.0.1:{grpc_port}", messages, CLIENTS, duration_s, max_requests)
        )
        log.info("service gRPC: %s", rows["gRPC capsnet"])
        return rows, _loop_profile(server, _kinds(server.port)[PROFILED], duration_s, max_requests)
    finally:
        server.stop()


PEER_KINDS = ("GET /healthz", "/predict, 28x28 PNG (multipart)", "/predict, 280x280 PNG (multipart)")
ROUNDS = 6  # the service and the peer in turn, each first in half of them: these machines drift by more than the gap between them


@contextlib.contextmanager
def _peer_server() -> Iterator[tuple[int, int]]:
    """The 18-line server, with the INT8 file the service serves by default: its pid and port."""
    port = free_port()
    env = {**os.environ, "MODEL": str(REPO / "weights" / "capsnet-int8.onnx")}
    app = ["--app-dir", str(PEER.parent), "naive_fastapi:app", "--port", str(port), "--log-level", "warning"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", *app], cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        yield proc.pid, port
    finally:
        proc.terminate()
        proc.wait(10)


def _side_by_side(duration_s: float, max_requests: int) -> dict | None:
    """The service and the peer up together, each kind the peer serves sent to one then the other, ROUNDS times, the
    order swapped each round: each round's service/peer ratios are taken within seconds of each other."""
    if not PEER.exists():
        return None
    server = Server({"CAPSNET_INTRA_OP_THREADS": "1"}).wait_ready()
    try:
        with _peer_server() as (peer_pid, peer_port):
            servers = (("service", server.proc.pid, server.port), ("peer", peer_pid, peer_port))
            targets = {who: (pid, f"http://127.0.0.1:{port}", _kinds(port)) for who, pid, port in servers}
            rounds: dict[str, dict[str, list[dict]]] = {kind: {"service": [], "peer": []} for kind in PEER_KINDS}
            for k in range(ROUNDS):
                for kind in PEER_KINDS:
                    for who in ("service", "peer") if k % 2 == 0 else ("peer", "service"):
                        pid, url, kinds = targets[who]
                        requests = kinds[kind]
                        load(url, requests, CLIENTS, 0.5, max_requests)  # the server warmed to this kind after the other's turn
                        rounds[kind][who].append(_row(pid, lambda u=url, r=requests: load(u, r, CLIENTS, duration_s, max_requests)))
                log.info("side by side, round %d of %d", k + 1, ROUNDS)
    finally:
        server.stop()
    return {"rounds": ROUNDS, "duration_s": duration_s, "kinds": rounds}


def measure(duration_s: float = 6.0, max_requests: int = 20000) -> dict:
    rows, profile = _service(duration_s, max_requests)
    return {
        "clients": CLIENTS,
        "duration_s": duration_s,
        "service": rows,
        "loop_profile": profile,
        "side_by_side": _side_by_side(min(duration_s, 3.0), max_requests),
        "peer_file": str(PEER.relative_to(REPO.parent)) if PEER.exists() else None,
    }
