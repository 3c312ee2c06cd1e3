"""Prometheus metrics on a registry of the app's own (so tests can start several apps in one process).

A request's time by phase, as KServe's model server reports it (request_preprocess_seconds, request_predict_seconds,
request_postprocess_seconds), with the wait for a batch apart: where a request's time goes is on /metrics, not only in
benchmarks. The phases are run and observed in one place, service/phases.py."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
PHASE_BUCKETS = (0.0001, 0.00025, 0.0005, *LATENCY_BUCKETS)
PHASES = {
    "preprocess": "parsing the body, decoding and preprocessing its images",
    "queue": "waiting for a batch in front of the model",
    "predict": "the batch in the model (network, counterfactual decodes)",
    "postprocess": "turning the model's outputs into the response",
}

# Where a request whose client went away was dropped: its body still arriving, being decoded, waiting for a batch, in a
# batch that ran to its end (a batch in the model is never cut short), or having its answer encoded.
ABANDON_PHASES = ("body", "preprocess", "queue", "predict", "postprocess")


class Progress:
    """The phase one request is in: EdgeMiddleware makes one per request, run_phases and the batcher move it on, and
    when the client goes away the phase it had reached labels `capsnet_requests_abandoned_total`."""

    __slots__ = ("gone", "phase", "request_id", "trace")

    def __init__(self, request_id: str | None = None) -> None:
        self.phase = "body"
        self.gone = False  # its client went away before the answer started
        self.request_id = request_id  # the client's X-Request-ID, else made when a log line or a span first needs one
        # the request's server span when it is traced: a service.tracing.RequestTrace, which imports this module
        self.trace: Any = None


PROGRESS: ContextVar[Progress] = ContextVar("capsnet_progress")


def progress() -> Progress:
    """This request's Progress; a detached one outside a request (in-process callers such as the benchmarks)."""
    return PROGRESS.get(None) or Progress()


class Metrics:
    """`multiprocess`: one of several worker processes behind one port (service/processes.py), whose counters and
    histograms prometheus_client keeps in files that every worker's /metrics reads together (its multiprocess mode, on
    because the supervisor set PROMETHEUS_MULTIPROC_DIR before the worker started). A gauge read from a function cannot
    be shared that way: there it is a `livesum` gauge, set from its function by `refresh` (each worker every second, and
    the scraped one at the scrape)."""

    def __init__(self, multiprocess: bool = False) -> None:
        self.multiprocess = multiprocess
        self._live: list[tuple[Gauge, Callable[[], float]]] = []
        # Requests between arrival and answer (EdgeMiddleware), those of them whose body is still arriving
        # (service.http.body.read_limited), and the rest: what the service has work for. Changed on the event loop only;
        # `working` is its own count so that the batcher's thread reads it whole, in one read.
        self.in_flight = 0
        self.receiving = 0
        self.working = 0
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "capsnet_requests_total", "HTTP requests by endpoint and status", ["endpoint", "method", "status"], registry=self.registry
        )
        self.latency = Histogram(
            "capsnet_request_seconds", "HTTP request latency", ["endpoint"], buckets=LATENCY_BUCKETS, registry=self.registry
        )
        self.phases = {
            name: Histogram(
                f"capsnet_request_{name}_seconds",
                f"time a request spent {doc}",
                ["endpoint"],
                buckets=PHASE_BUCKETS,
                registry=self.registry,
            )
            for name, doc in PHASES.items()
        }
        self.batch_size = Histogram(
            "capsnet_batch_size", "images per onnxruntime call", buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256), registry=self.registry
        )
        self.batches = Counter(
            "capsnet_batches",
            "onnxruntime calls, by whether the service was working on other requests at the time (busy: the batch ran on "
            "fewer threads, leaving the event loop a core, where the engine has such a session)",
            ["load"],
            registry=self.registry,
        )
        self.abandoned = Counter(
            "capsnet_requests_abandoned",
            "requests whose client went away before their answer, by the phase their work stopped in",
            ["phase"],
            registry=self.registry,
        )
        for phase in ABANDON_PHASES:
            self.abandoned.labels(phase)
        self.live_gauge("capsnet_requests_in_flight", "requests being served", lambda: self.in_flight)
        self.live_gauge("capsnet_requests_receiving", "requests being served whose body is still arriving", lambda: self.receiving)

    def live_gauge(self, name: str, documentation: str, read: Callable[[], float]) -> None:
        """A gauge whose value is `read()` when scraped (summed over the workers when there are several)."""
        if self.multiprocess:
            self._live.append((Gauge(name, documentation, registry=self.registry, multiprocess_mode="livesum"), read))
        else:
            Gauge(name, documentation, registry=self.registry).set_function(read)

    def watch(self, queued_images: Callable[[], int], decode_jobs: Callable[[], int]) -> None:
        """The model queue and the decode pool, once they exist: the pool's load is what an operator reads to size
        CAPSNET_DECODE_WORKERS, and how a test sees that a large body is being decoded off the loop while the loop answers."""
        self.live_gauge("capsnet_queue_images", "images waiting for the model", queued_images)
        self.live_gauge(
            "capsnet_decode_pool_jobs",
            "uploads being decoded and large bodies being parsed off the event loop, running or waiting for a thread",
            decode_jobs,
        )

    def refresh(self) -> None:
        """The live gauges' values into the shared files (several workers only)."""
        for gauge, read in self._live:
            gauge.set(read())

    def exposition(self) -> bytes:
        """The text /metrics answers: this process's registry, or every worker's files together."""
        if not self.multiprocess:
            return generate_latest(self.registry)
        self.refresh()
        registry = CollectorRegistry()
        MultiProcessCollector(registry)
        return generate_latest(registry)

    @contextmanager
    def serving(self) -> Iterator[None]:
        """One request, from arrival to answer."""
        self.in_flight += 1
        self.working += 1
        try:
            yield
        finally:
            self.in_flight -= 1
            self.working -= 1

    @contextmanager
    def receiving_body(self) -> Iterator[None]:
        """A request waiting on its client's bytes, not on the service: while a body is on the network, its request is
        not counted as work (the batcher's `busy`), so a stranger trickling bodies does not make a lone request run as
        if the service were busy."""
        self.receiving += 1
        self.working -= 1
        try:
            yield
        finally:
            self.receiving -= 1
            self.working += 1

    def observe_batch(self, size: int, busy: bool) -> None:
        self.batch_size.observe(size)
        self.batches.labels("busy" if busy else "alone").inc()
