"""A request's phases, run and timed in one place, on one clock: decode and preprocess, the model, postprocess.

Every route that runs a model goes through `run_phases`, as KServe's model server runs preprocess -> predict ->
postprocess: each phase's time is observed under the route's endpoint on /metrics (the wait for a batch apart from the
batch in the model), the request's Progress follows it (what a client that has gone is counted under), and the
times come back for the Open Inference Protocol's statistics."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from service.engine.batcher import Inference
from service.metrics import Metrics, progress

X = TypeVar("X")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Timed(Generic[R]):
    """What postprocess made, and where the request's time went, in seconds."""

    result: R
    preprocess_s: float  # from run_phases' start (plus what was carried in) to the model's input
    model_wall_s: float  # from handing the input to the model to having its output: the wait, hand-offs and the batch
    inference: Inference  # the wait for a batch and the batch in the model, as the engine measured them
    postprocess_s: float


async def run_phases(
    metrics: Metrics,
    endpoint: str,
    preprocess: Awaitable[X],
    model: Callable[[X], Awaitable[Inference]],
    postprocess: Callable[[X, Inference], Awaitable[R]],
    carried_s: float = 0.0,
) -> Timed[R]:
    """preprocess, then model on what it made, then postprocess on both. `carried_s`: preprocessing done before the
    route ran (the body's parse, service.http.body)."""
    phases, at = metrics.phases, progress()
    at.phase = "preprocess"
    start = time.perf_counter()
    x = await preprocess
    preprocessed = time.perf_counter()
    phases["preprocess"].labels(endpoint).observe(carried_s + preprocessed - start)
    at.phase = "queue"
    inference = await model(x)
    inferred = time.perf_counter()
    phases["queue"].labels(endpoint).observe(inference.queue_s)
    phases["predict"].labels(endpoint).observe(inference.model_s)
    at.phase = "postprocess"
    result = await postprocess(x, inference)
    done = time.perf_counter()
    phases["postprocess"].labels(endpoint).observe(done - inferred)
    return Timed(result, carried_s + preprocessed - start, inferred - preprocessed, inference, done - inferred)
