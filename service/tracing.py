"""Traces of requests with OpenTelemetry: one trace per request, a server span with a child span per phase.

Why spans of our own rather than an instrumentation package: the phases that matter (the body's arrival, decoding,
the wait for a batch, the batch in the model, encoding) are known in one place, service/phases.py, for REST and gRPC
alike, and are timed there already; an HTTP instrumentation would see neither the phases nor gRPC. The phase spans are
made after the fact from those timings (explicit start and end times), so tracing adds no work inside a phase.

Why off by default, and nothing when off: the OpenTelemetry SDK is only imported when an exporter is named. Until then
a request pays one attribute read (`Progress.trace` is None) in the middleware and in run_phases, no span objects, no
context switches. A wrong OTEL_* value turns tracing off with a warning: tracing is never a reason not to serve.

Probes are not traced: /healthz, /readyz, /metrics and the protocol's health endpoints (and their gRPC twins) are
polled every few seconds and would bury the requests. Each log line written while a request is served carries its
request id and, when traced, its trace id (`LogContext`).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, StatusCode, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from pydantic import ValidationError

from service.metrics import PROGRESS, Progress
from service.settings import TracingSettings

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

log = logging.getLogger("capsnet.tracing")

SCOPE = "capsnet-serve"
PROBES = frozenset({"/healthz", "/readyz", "/metrics", "/v2/health/live", "/v2/health/ready"})
GRPC_PROBES = frozenset({"ServerLive", "ServerReady", "ModelReady"})
_PROPAGATOR = TraceContextTextMapPropagator()  # W3C traceparent: a caller's trace goes on here
MAX_REQUEST_ID = 128  # a client's X-Request-ID longer than this, or with unprintable characters, is replaced


class TracingConfigError(ValueError):
    """An OTEL_* value that cannot be honoured."""


def request_id(given: str | None = None) -> str:
    """The client's id when it is a reasonable one (printable, at most MAX_REQUEST_ID characters), else a new one."""
    if given and len(given) <= MAX_REQUEST_ID and given.isprintable():
        return given
    return uuid.uuid4().hex[:16]


class RequestTrace:
    """One request's server span and the clock its phases are placed on: perf_counter readings (what the service
    times its phases with) become epoch nanoseconds from the one pair of readings taken when the span started."""

    __slots__ = ("_perf", "_wall_ns", "context", "span", "tracer")

    def __init__(self, tracer: Tracer, span: Span, context: Any, perf: float, wall_ns: int) -> None:
        self.tracer, self.span, self.context = tracer, span, context
        self._perf, self._wall_ns = perf, wall_ns

    @property
    def trace_id(self) -> str:
        return format(self.span.get_span_context().trace_id, "032x")

    def ns(self, perf: float) -> int:
        return self._wall_ns + int((perf - self._perf) * 1e9)

    def phase(
        self, name: str, start: float, end: float, attributes: Mapping[str, Any] | None = None, error: BaseException | None = None
    ) -> None:
        """A finished phase, from `start` to `end` (perf_counter seconds), as a child of the server span."""
        span = self.tracer.start_span(name, context=self.context, attributes=attributes, start_time=self.ns(start))
        if error is not None:
            span.set_status(StatusCode.ERROR, type(error).__name__)
        span.end(end_time=self.ns(max(end, start)))

    def set(self, attributes: Mapping[str, Any]) -> None:
        self.span.set_attributes(attributes)

    def end(self, attributes: Mapping[str, Any], error: bool, name: str | None = None) -> None:
        if name is not None:
            self.span.update_name(name)
        self.span.set_attributes(attributes)
        if error:
            self.span.set_status(StatusCode.ERROR)
        self.span.end()


class Tracing:
    """The app's tracer, on a provider of its own (not the process-wide one: tests start several apps in one process,
    and FastAPI's own telemetry, which reads the global provider, stays off)."""

    def __init__(self, provider: TracerProvider) -> None:
        self.provider = provider
        self.tracer = provider.get_tracer(SCOPE)

    def start(
        self, name: str, kind: SpanKind, attributes: dict[str, Any], carrier: Iterable[tuple[str, str]], progress: Progress
    ) -> RequestTrace | None:
        """The server span of one request, continuing the caller's trace when its `traceparent` says so; None when
        the sampler leaves the request out (then nothing more is spent on it)."""
        headers = {k: v for k, v in carrier if k in ("traceparent", "tracestate")}
        parent = _PROPAGATOR.extract(headers) if headers else None
        perf, wall_ns = time.perf_counter(), time.time_ns()
        if progress.request_id is None:
            progress.request_id = request_id()
        attributes["capsnet.request_id"] = progress.request_id
        span = self.tracer.start_span(name, context=parent, kind=kind, attributes=attributes, start_time=wall_ns)
        if not span.is_recording():
            return None
        return RequestTrace(self.tracer, span, trace.set_span_in_context(span), perf, wall_ns)

    def shutdown(self) -> None:
        """Sends what is still buffered (the batch processor's last spans), then stops the exporters."""
        self.provider.shutdown()


def _sampler(s: TracingSettings) -> Any:
    from opentelemetry.sdk.trace import sampling

    name = s.traces_sampler.strip().lower()
    base = name.removeprefix("parentbased_")
    if base == "traceidratio":
        try:
            ratio = 1.0 if s.traces_sampler_arg is None else float(s.traces_sampler_arg)
        except ValueError:
            raise TracingConfigError(f"OTEL_TRACES_SAMPLER_ARG={s.traces_sampler_arg!r} is not a number") from None
        if not 0.0 <= ratio <= 1.0:
            raise TracingConfigError(f"OTEL_TRACES_SAMPLER_ARG={ratio} is not a ratio between 0 and 1")
        root = sampling.TraceIdRatioBased(ratio)
    elif base in ("always_on", "always_off"):
        root = sampling.ALWAYS_ON if base == "always_on" else sampling.ALWAYS_OFF
    else:
        raise TracingConfigError(f"OTEL_TRACES_SAMPLER={s.traces_sampler!r} is not a sampler this service knows")
    return sampling.ParentBased(root) if name.startswith("parentbased_") else root


def _exporters(s: TracingSettings) -> list[SpanExporter]:
    names = [n.strip().lower() for n in (s.traces_exporter or "").split(",") if n.strip()]
    if s.traces_exporter is None and (s.exporter_otlp_endpoint or s.exporter_otlp_traces_endpoint):
        names = ["otlp"]  # the specification's default exporter, named by setting where it sends
    exporters: list[SpanExporter] = []
    for name in names:
        if name == "none":
            continue
        if name == "console":
            from opentelemetry.sdk.trace.export import ConsoleSpanExporter

            exporters.append(ConsoleSpanExporter(service_name=s.service_name))
        elif name == "otlp":
            exporters.append(_otlp(s))
        else:
            raise TracingConfigError(f"OTEL_TRACES_EXPORTER names {name!r}; this service knows otlp, console and none")
    return exporters


def _otlp(s: TracingSettings) -> SpanExporter:
    protocol = (s.exporter_otlp_traces_protocol or s.exporter_otlp_protocol).strip().lower()
    endpoint = s.exporter_otlp_traces_endpoint
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        return GrpcExporter(endpoint=endpoint or s.exporter_otlp_endpoint)
    if protocol == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

        if endpoint is None and s.exporter_otlp_endpoint:  # the base URL: traces go to its /v1/traces
            endpoint = s.exporter_otlp_endpoint.rstrip("/") + "/v1/traces"
        return HttpExporter(endpoint=endpoint)
    raise TracingConfigError(f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r}: use http/protobuf or grpc")


def configure(extra: SpanExporter | None = None) -> Tracing | None:
    """Tracing as the OTEL_* variables say, or None (off). `extra`: an exporter that gets every span besides those the
    variables name, synchronously (the SDK's InMemorySpanExporter, to read spans back)."""
    try:
        s = TracingSettings()
        if s.sdk_disabled:
            return None
        exporters = _exporters(s)
        if not exporters and extra is None:
            return None
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

        provider = TracerProvider(sampler=_sampler(s), resource=Resource.create({"service.name": s.service_name}))
        for exporter in exporters:  # in a thread of their own, in batches: a slow collector never holds a request
            provider.add_span_processor(BatchSpanProcessor(exporter))
        if extra is not None:
            provider.add_span_processor(SimpleSpanProcessor(extra))
    except (ValidationError, TracingConfigError, ImportError, ValueError) as e:
        log.warning("tracing is off: its configuration is not usable: %s", " ".join(str(e).split()))
        return None
    log.info(
        "tracing on: %s, sampler %s, service.name %s",
        ", ".join(type(e).__name__ for e in exporters) or "no exporter but the given one",
        s.traces_sampler,
        s.service_name,
    )
    return Tracing(provider)


class LogContext(logging.Filter):
    """Adds `context` to every record: ` [request <id> trace <id>]` for a line written while a request is served
    (its id made here if it had none yet), empty otherwise, so a format can place it."""

    def filter(self, record: logging.LogRecord) -> bool:
        progress = PROGRESS.get(None)
        if progress is None:
            record.context = ""
            return True
        if progress.request_id is None:
            progress.request_id = request_id()
        trace = progress.trace
        record.context = f" [request {progress.request_id}{f' trace {trace.trace_id}' if trace is not None else ''}]"
        return True
