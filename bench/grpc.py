"""The Open Inference Protocol over gRPC against REST /v2, and tracing on against off, each pair in one run.

gRPC against REST: one service with both (CAPSNET_GRPC_PORT), the same request to each, `capsnet` at batch 1 (one 28x28
image, lengths and poses asked for) at 1, 4 and 16 clients, the transports alternated level by level so that the
machine's drift falls on both. Over REST the request goes two ways: the binary tensor data extension (raw bytes, as
gRPC's raw contents) and JSON. Why the clients send pre-built bytes (bench.loadgen for HTTP, pre-serialized messages on
grpc.aio channels, one channel a client as one connection a client over HTTP): on two cores the client shares the CPU
with the server, and a full client (tritonclient) would spend more CPU a call than the service does.

Tracing on against off: two servers, one with OTEL_TRACES_EXPORTER=otlp sending every span (sampler always on) to a
collector stand-in on loopback that reads each export and answers 200, one without; /predict at 1 and 16 clients,
off then on, `rounds` times. What tracing costs is the difference within each round.
"""

from __future__ import annotations

import asyncio
import base64
import io
import logging
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
import numpy as np
import orjson
from PIL import Image
from tritonclient.grpc import service_pb2 as pb

from bench.loadgen import Result, Send, closed_loop, load
from harness.clients import LOOPBACK, build_request
from harness.payloads import OIP_INFER, oip_binary_requests, tensor_images
from harness.server import Server, free_port

log = logging.getLogger("bench.grpc")
CONCURRENCY = (1, 4, 16)
TRACING_CONCURRENCY = (1, 16)
PATH = OIP_INFER
INFER = "/inference.GRPCInferenceService/ModelInfer"


def _rest_json(port: int, images: list[np.ndarray]) -> list[bytes]:
    out = []
    for x in images:
        body = {
            "inputs": [{"name": "image", "datatype": "FP32", "shape": [1, 1, 28, 28], "data": x.ravel().round(4).tolist()}],
            "outputs": [{"name": "lengths"}, {"name": "poses"}],
        }
        out.append(build_request("127.0.0.1", port, PATH, orjson.dumps(body), "application/json"))
    return out


def _grpc_messages(images: list[np.ndarray]) -> list[bytes]:
    out = []
    for x in images:
        request = pb.ModelInferRequest(model_name="capsnet")
        request.inputs.add(name="image", datatype="FP32", shape=x.shape)
        request.outputs.add(name="lengths")
        request.outputs.add(name="poses")
        request.raw_input_contents.append(x.astype("<f4").tobytes())
        out.append(request.SerializeToString())
    return out


async def _grpc_run(target: str, messages: list[bytes], concurrency: int, duration_s: float, max_requests: int) -> Result:
    """`concurrency` clients, each on a channel of its own, calling back to back until the time or count runs out."""
    if target.rsplit(":", 1)[0] not in LOOPBACK:
        raise ValueError(f"only loopback is a target, not {target}")

    @asynccontextmanager
    async def channel() -> AsyncIterator[Send]:
        async with grpc.aio.insecure_channel(target) as opened:
            call = opened.unary_unary(INFER)  # bytes in, bytes out: the messages are serialized already

            async def send(i: int) -> tuple[int, float]:
                t0 = time.perf_counter()
                try:
                    await call(messages[i], timeout=30)
                    status = 200
                except grpc.aio.AioRpcError as e:
                    status = e.code().value[0]
                return status, time.perf_counter() - t0

            yield send

    return await closed_loop(channel, len(messages), concurrency, duration_s, max_requests)


def grpc_load(target: str, messages: list[bytes], concurrency: int, duration_s: float, max_requests: int) -> Result:
    return asyncio.run(_grpc_run(target, messages, concurrency, duration_s, max_requests))


def _cpu(server: Server) -> float:
    return sum(server.thread_cpu_seconds())


def _row(server: Server, run, **labels: object) -> dict:
    before = _cpu(server)
    s = run().summary()
    s["server_cpu_ms_per_request"] = round((_cpu(server) - before) * 1000.0 / max(s["requests"], 1), 3)
    row = {**labels, **s}
    log.info("%s", row)
    return row


def transports(duration_s: float, max_requests: int = 20000) -> dict:
    grpc_port = free_port()
    server = Server({"CAPSNET_GRPC_PORT": str(grpc_port)}).wait_ready()
    try:
        images = tensor_images()
        target = f"127.0.0.1:{grpc_port}"
        clients = {
            "gRPC (raw contents)": lambda c, d, n: grpc_load(target, _grpc_messages(images), c, d, n),
            "REST /v2 (binary extension)": lambda c, d, n: load(server.url, oip_binary_requests(server.port, images), c, d, n),
            "REST /v2 (JSON)": lambda c, d, n: load(server.url, _rest_json(server.port, images), c, d, n),
        }
        for name, run in clients.items():  # warm-up, and a check that each way is answered
            warm = run(4, 1.0, 200)
            assert warm.errors == 0 and set(warm.statuses) == {200}, (name, warm.statuses)
        rows = [
            _row(server, lambda run=run, c=c: run(c, duration_s, max_requests), transport=name, concurrency=c)
            for c in CONCURRENCY
            for name, run in clients.items()
        ]
        return {"duration_s": duration_s, "rows": rows}
    finally:
        server.stop()


# ---- tracing on against off ----


class _Collector(BaseHTTPRequestHandler):
    """An OTLP/HTTP collector stand-in: reads each export whole and answers 200 with an empty ExportTraceServiceResponse."""

    exports = 0
    nbytes = 0

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        type(self).exports += 1
        type(self).nbytes += len(body)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def _png() -> str:
    a = np.zeros((28, 28), np.uint8)
    a[4:24, 12:16] = 255
    buf = io.BytesIO()
    Image.fromarray(a).save(buf, "PNG")
    return base64.b64encode(buf.getvalue()).decode()


def tracing(duration_s: float, rounds: int = 3, max_requests: int = 20000) -> dict:
    collector = ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    threading.Thread(target=collector.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{collector.server_address[1]}"
    on_env = {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_TRACES_SAMPLER": "always_on"}
    off = Server({"OTEL_SDK_DISABLED": "true"}).wait_ready()
    on = Server(on_env).wait_ready()
    try:
        body = orjson.dumps({"image": _png()})
        servers = {"off": off, "on": on}
        reqs = {k: [build_request("127.0.0.1", s.port, "/predict", body, "application/json")] for k, s in servers.items()}
        for k, s in servers.items():
            warm = load(s.url, reqs[k], 4, 1.0, 200)
            assert warm.errors == 0 and set(warm.statuses) == {200}, (k, warm.statuses)
        rows = []
        for r in range(1, rounds + 1):
            for c in TRACING_CONCURRENCY:
                for k, s in servers.items():
                    rows.append(
                        _row(s, lambda s=s, k=k, c=c: load(s.url, reqs[k], c, duration_s, max_requests), round=r, tracing=k, concurrency=c)
                    )
        on.stop()  # its last spans out before the collector's count is read
        return {
            "duration_s": duration_s,
            "rounds": rounds,
            "exporter": "otlp (http/protobuf) to a loopback collector stand-in, every request sampled",
            "collector": {"exports": _Collector.exports, "bytes": _Collector.nbytes},
            "rows": rows,
        }
    finally:
        on.stop()
        off.stop()
        collector.shutdown()


def measure(duration_s: float = 8.0, rounds: int = 3) -> dict:
    return {"transports": transports(duration_s), "tracing": tracing(duration_s, rounds)}
