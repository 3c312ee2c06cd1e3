"""Payload logging: what the model was given and what it answered, as JSON lines, for a sample of requests.

Why: to audit or replay what a deployed model saw (the thing users of KServe, Seldon and MLServer ask for first after
probes), without a proxy in front. Off unless CAPSNET_PAYLOAD_LOG names a file (or `-`, standard error). Each line is
one inference of one model through any route (REST, the Open Inference Protocol over REST or gRPC): its time, the
request's id and trace id (the ones in the log lines and the spans), the route, the model, each input tensor's shape
and sha256 (its values too with CAPSNET_PAYLOAD_LOG_TENSORS, which makes lines large), and the outputs' shapes with
the capsules' lengths, rounded. CAPSNET_PAYLOAD_LOG_SAMPLE keeps that share of requests, drawn at random.

Written by one thread of the logging module's QueueHandler, so a slow disk never holds up the event loop.
"""

from __future__ import annotations

import hashlib
import logging
import logging.handlers
import queue
import random
import sys
import time
from typing import Any

import numpy as np
import orjson

from service.metrics import progress

log = logging.getLogger("capsnet.payload")


class PayloadLog:
    def __init__(self, path: str, sample: float, tensors: bool) -> None:
        self.sample, self.tensors = sample, tensors
        target = logging.StreamHandler(sys.stderr) if path == "-" else logging.FileHandler(path, encoding="utf-8")
        target.setFormatter(logging.Formatter("%(message)s"))
        lines: queue.SimpleQueue[logging.LogRecord] = queue.SimpleQueue()
        self.listener = logging.handlers.QueueListener(lines, target)
        self.writer = logging.getLogger(f"capsnet.payload.lines.{id(self)}")
        self.writer.propagate = False
        self.writer.setLevel(logging.INFO)
        self.writer.addHandler(logging.handlers.QueueHandler(lines))
        self.listener.start()
        log.info("payload log to %s, %.0f%% of requests, tensors %s", path, 100 * sample, "in full" if tensors else "as hashes")

    def close(self) -> None:
        self.listener.stop()  # the lines still queued are written first

    def record(self, endpoint: str, model: str, inputs: Any, out: dict[str, np.ndarray]) -> None:
        if self.sample < 1.0 and random.random() >= self.sample:
            return
        at = progress()
        line = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + f".{int(time.time() * 1000) % 1000:03d}Z",
            "request_id": at.request_id,
            "trace_id": at.trace.trace_id if at.trace is not None else None,
            "endpoint": endpoint,
            "model": model,
            "inputs": {name: self._tensor(x) for name, x in _named(inputs).items()},
            "outputs": {name: {"shape": list(v.shape)} for name, v in out.items()},
        }
        if "lengths" in out:
            line["lengths"] = np.round(np.asarray(out["lengths"], np.float64), 4).tolist()
        self.writer.info(orjson.dumps(line).decode())

    def _tensor(self, x: np.ndarray) -> dict[str, Any]:
        x = np.ascontiguousarray(x)
        entry: dict[str, Any] = {"shape": list(x.shape), "dtype": str(x.dtype), "sha256": hashlib.sha256(x.tobytes()).hexdigest()}
        if self.tensors:
            entry["values"] = np.round(x.astype(np.float64), 5).tolist() if x.dtype.kind == "f" else x.tolist()
        return entry


def _named(inputs: Any) -> dict[str, np.ndarray]:
    """A route's model input: the image tensor of the REST routes, or the protocol's tensors by name."""
    if isinstance(inputs, np.ndarray):
        return {"image": inputs}
    return dict(getattr(inputs, "inputs", {}))


def open_payload_log(path: str | None, sample: float, tensors: bool) -> PayloadLog | None:
    return PayloadLog(path, sample, tensors) if path else None
