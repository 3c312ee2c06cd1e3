"""Per-model inference statistics in the shape of Triton's statistics extension (`GET /v2/models/{m}/stats`).

Why Triton's shape: a client or dashboard written for Triton (tritonclient's get_inference_statistics, perf_analyzer)
reads these unchanged. What is counted is what the v2 infer endpoint served, timed on the event loop, which is the only
place these counters are touched (no lock). `compute_input` is reading and checking the tensors, `queue` the wait for a
batch in the batcher (and the hand-offs to and from its thread), `compute_infer` the batch in the model,
`compute_output` encoding the response. `fail` counts every request for the model that was not answered 200,
refused inputs included. `execution_count` counts requests run: several capsnet requests can share one onnxruntime
call in the batcher (`capsnet_batch_size` in /metrics counts those calls).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Duration:
    count: int = 0
    ns: int = 0

    def add(self, ns: int) -> None:
        self.count += 1
        self.ns += ns

    def as_json(self) -> dict[str, int]:
        return {"count": self.count, "ns": self.ns}


@dataclass(frozen=True)
class Phases:
    """One successful request's time, in ns, in each of Triton's phases."""

    input_ns: int
    infer_ns: int
    output_ns: int
    queue_ns: int = 0

    @property
    def total_ns(self) -> int:
        return self.input_ns + self.queue_ns + self.infer_ns + self.output_ns


@dataclass
class _BatchStats:
    compute_input: Duration = field(default_factory=Duration)
    compute_infer: Duration = field(default_factory=Duration)
    compute_output: Duration = field(default_factory=Duration)


@dataclass
class ModelStats:
    inference_count: int = 0  # batch rows inferred
    execution_count: int = 0  # requests run
    last_inference_ms: int = 0  # since the epoch, as Triton reports it
    success: Duration = field(default_factory=Duration)
    fail: Duration = field(default_factory=Duration)
    queue: Duration = field(default_factory=Duration)
    compute_input: Duration = field(default_factory=Duration)
    compute_infer: Duration = field(default_factory=Duration)
    compute_output: Duration = field(default_factory=Duration)
    batches: dict[int, _BatchStats] = field(default_factory=dict)

    def succeeded(self, batch: int, phases: Phases) -> None:
        self.inference_count += batch
        self.execution_count += 1
        self.last_inference_ms = time.time_ns() // 1_000_000
        self.success.add(phases.total_ns)
        self.queue.add(phases.queue_ns)
        by_size = self.batches.setdefault(batch, _BatchStats())
        for total in (self, by_size):
            total.compute_input.add(phases.input_ns)
            total.compute_infer.add(phases.infer_ns)
            total.compute_output.add(phases.output_ns)

    def failed(self, ns: int) -> None:
        self.fail.add(ns)

    def as_json(self, name: str, version: str) -> dict[str, Any]:
        zero = Duration().as_json()  # no response cache here
        return {
            "name": name,
            "version": version,
            "last_inference": self.last_inference_ms,
            "inference_count": self.inference_count,
            "execution_count": self.execution_count,
            "inference_stats": {
                "success": self.success.as_json(),
                "fail": self.fail.as_json(),
                "queue": self.queue.as_json(),
                "compute_input": self.compute_input.as_json(),
                "compute_infer": self.compute_infer.as_json(),
                "compute_output": self.compute_output.as_json(),
                "cache_hit": zero,
                "cache_miss": zero,
            },
            "batch_stats": [
                {
                    "batch_size": n,
                    "compute_input": b.compute_input.as_json(),
                    "compute_infer": b.compute_infer.as_json(),
                    "compute_output": b.compute_output.as_json(),
                }
                for n, b in sorted(self.batches.items())
            ],
        }
