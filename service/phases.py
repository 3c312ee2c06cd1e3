"""A request's phases, run and timed in one place, on one clock: decode and preprocess, the model, postprocess.

Every route that runs a model goes through `run_phases`, as KServe's model server runs preprocess -> predict ->
postprocess: each phase's time is observed under the route's endpoint on /metrics (the wait for a batch apart from the
batch in the model), the request's Progress follows it (what a client that has gone is counted under), the times come
back for the Open Inference Protocol's statistics, and a traced request gets a span for each phase (service/tracing.py),
made from these same timings once the phases are over: one clock for metrics, statistics and traces."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from service.engine.batcher import Inference
from service.metrics import Metrics, progress

if TYPE_CHECKING:
    from service.payload_log import PayloadLog
    from service.tracing import RequestTrace

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
    *,
    model_name: str | None = None,
    payloads: PayloadLog | None = None,
) -> Timed[R]:
    """preprocess, then model on what it made, then postprocess on both. `carried_s`: preprocessing done before the
    route ran (the body's parse, service.http.body). `model_name` names the model in a trace and the payload log (by
    default the one `?model=` in the endpoint names, else capsnet). `payloads`: where a sample of inputs and outputs is
    written (service/payload_log.py), when on."""
    phases, at = metrics.phases, progress()
    at.phase = "preprocess"
    start = began = time.perf_counter()
    try:
        x = await preprocess
        preprocessed = began = time.perf_counter()
        phases["preprocess"].labels(endpoint).observe(carried_s + preprocessed - start)
        at.phase = "queue"
        inference = await model(x)
        inferred = began = time.perf_counter()
        phases["queue"].labels(endpoint).observe(inference.queue_s)
        phases["predict"].labels(endpoint).observe(inference.model_s)
        at.phase = "postprocess"
        result = await postprocess(x, inference)
        done = time.perf_counter()
        phases["postprocess"].labels(endpoint).observe(done - inferred)
    except BaseException as e:
        if at.trace is not None:
            at.trace.phase(at.phase, began, time.perf_counter(), error=e)
        raise
    name = model_name or endpoint.partition("?model=")[2] or "capsnet"
    if at.trace is not None:
        _spans(at.trace, name, inference, (start - carried_s, preprocessed, inferred, done))
    if payloads is not None:
        payloads.record(endpoint, name, x, inference.out)
    return Timed(result, carried_s + preprocessed - start, inferred - preprocessed, inference, done - inferred)


def _spans(trace: RequestTrace, model_name: str, inference: Inference, marks: tuple[float, float, float, float]) -> None:
    """The phases as spans: the wait for a batch and the batch in the model placed from the engine's own timings."""
    start, preprocessed, inferred, done = marks
    rows = len(next(iter(inference.out.values()))) if inference.out else 0
    attributes = {"capsnet.model": model_name, "capsnet.batch_size": rows}
    trace.set(attributes)
    queued = preprocessed + inference.queue_s
    trace.phase("preprocess", start, preprocessed)
    trace.phase("queue", preprocessed, queued)
    trace.phase("predict", queued, min(queued + inference.model_s, inferred), attributes)
    trace.phase("postprocess", inferred, done)
