"""Tracing with OpenTelemetry: the spans a request makes (read back through the SDK's InMemorySpanExporter from the real
app, over HTTP and gRPC), their parent and attributes, probes left out, a caller's trace continued; the OTEL_* variables
through the real entry point (console exporter, log lines naming the request and its trace); a configuration that
cannot be honoured turns tracing off with a warning and the service still answers."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator

import numpy as np
import pytest
import tritonclient.grpc as tgrpc
from fastapi.testclient import TestClient
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from harness.server import Server, free_port
from service.app import create_app
from service.settings import Settings, TracingSettings

PHASES = ["preprocess", "queue", "predict", "postprocess"]
OTEL = [f"OTEL_{name.upper()}" for name in TracingSettings.model_fields]


@pytest.fixture(autouse=True)
def _no_otel_from_the_shell(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test says its own OTEL_* variables."""
    for name in OTEL:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def traced() -> Iterator[tuple[TestClient, InMemorySpanExporter, int]]:
    exporter = InMemorySpanExporter()
    grpc_port = free_port()
    app = create_app(Settings(intra_op_threads=1, warmup_runs=1, grpc_port=grpc_port), span_exporter=exporter)
    with TestClient(app) as client:
        yield client, exporter, grpc_port


def _spans(exporter: InMemorySpanExporter, call) -> list[ReadableSpan]:
    exporter.clear()
    call()
    return list(exporter.get_finished_spans())


def _tree(spans: list[ReadableSpan]) -> tuple[ReadableSpan, list[ReadableSpan]]:
    """The one server span and its children, checked to be one trace."""
    (server,) = [s for s in spans if s.kind == SpanKind.SERVER]
    children = [s for s in spans if s is not server]
    assert server.parent is None or server.parent.is_remote
    for child in children:
        assert child.context.trace_id == server.context.trace_id, child.name
        assert child.parent is not None and child.parent.span_id == server.context.span_id, child.name
        assert server.start_time <= child.start_time <= child.end_time <= server.end_time, child.name
    return server, children


def _pixels() -> list[list[float]]:
    x = np.zeros((28, 28))
    x[4:24, 13:16] = 1.0
    return x.tolist()


def test_predict_is_one_trace_with_a_span_per_phase(traced):
    client, exporter, _ = traced
    spans = _spans(exporter, lambda: client.post("/predict", json={"pixels": _pixels()}, headers={"X-Request-ID": "req-42"}))
    server, children = _tree(spans)
    assert server.name == "POST /predict"
    attrs = server.attributes
    assert attrs["http.request.method"] == "POST" and attrs["http.route"] == "/predict"
    assert attrs["http.response.status_code"] == 200 and server.status.status_code == StatusCode.UNSET
    assert attrs["capsnet.model"] == "capsnet" and attrs["capsnet.batch_size"] == 1
    assert attrs["capsnet.request_id"] == "req-42"
    assert [s.name for s in children] == ["body", *PHASES]
    predict = next(s for s in children if s.name == "predict")
    assert predict.attributes["capsnet.model"] == "capsnet" and predict.attributes["capsnet.batch_size"] == 1
    ordered = sorted(children, key=lambda s: s.start_time)
    assert [s.name for s in ordered] == ["body", *PHASES], "placed in the order they ran"


def test_the_open_inference_protocol_names_its_model_and_batch(traced):
    client, exporter, _ = traced
    body = {
        "inputs": [
            {"name": "digit", "datatype": "INT64", "shape": [3], "data": [1, 2, 3]},
            {"name": "pose", "datatype": "FP32", "shape": [3, 16], "data": [0.0] * 48},
        ]
    }
    server, children = _tree(_spans(exporter, lambda: client.post("/v2/models/decoder/infer", json=body)))
    assert server.name == "POST /v2/models/{model_name}/infer"
    assert server.attributes["capsnet.model"] == "decoder" and server.attributes["capsnet.batch_size"] == 3
    assert [s.name for s in children] == ["body", *PHASES]


def test_a_refused_request_marks_the_phase_it_failed_in(traced):
    client, exporter, _ = traced
    body = {"inputs": [{"name": "image", "datatype": "FP32", "shape": [1, 28, 28], "data": [0.0] * 784}]}
    server, children = _tree(_spans(exporter, lambda: client.post("/v2/models/capsnet/infer", json=body)))
    assert server.attributes["http.response.status_code"] == 400
    assert server.status.status_code == StatusCode.UNSET, "a client's mistake is not the server's error"
    (failed,) = [s for s in children if s.name == "preprocess"]
    assert failed.status.status_code == StatusCode.ERROR


def test_probes_are_not_traced(traced):
    client, exporter, _ = traced

    def probes() -> None:
        for path in ("/healthz", "/readyz", "/metrics", "/v2/health/live", "/v2/health/ready"):
            assert client.get(path).status_code == 200, path

    assert _spans(exporter, probes) == []


def test_a_callers_trace_goes_on(traced):
    client, exporter, _ = traced
    trace_id, parent_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    headers = {"traceparent": f"00-{trace_id}-{parent_id}-01"}
    server, _ = _tree(_spans(exporter, lambda: client.post("/predict", json={"pixels": _pixels()}, headers=headers)))
    assert format(server.context.trace_id, "032x") == trace_id
    assert server.parent is not None and format(server.parent.span_id, "016x") == parent_id


def test_grpc_calls_are_traced_and_their_probes_are_not(traced):
    _, exporter, grpc_port = traced
    x = np.zeros((2, 1, 28, 28), np.float32)

    def calls() -> None:
        with tgrpc.InferenceServerClient(f"127.0.0.1:{grpc_port}") as c:
            assert c.is_server_live() and c.is_server_ready() and c.is_model_ready("capsnet")
            c.infer("capsnet", [tgrpc.InferInput("image", list(x.shape), "FP32").set_data_from_numpy(x)])

    server, children = _tree(_spans(exporter, calls))
    assert server.name == "inference.GRPCInferenceService/ModelInfer"
    attrs = server.attributes
    assert attrs["rpc.system"] == "grpc" and attrs["rpc.method"] == "ModelInfer" and attrs["rpc.grpc.status_code"] == 0
    assert attrs["capsnet.model"] == "capsnet" and attrs["capsnet.batch_size"] == 2
    assert [s.name for s in children] == PHASES, "no body phase: gRPC has the message before the call begins"


@pytest.mark.parametrize(
    "env",
    [
        {"OTEL_TRACES_EXPORTER": "zipkin"},
        {"OTEL_TRACES_EXPORTER": "console", "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "half"},
        {"OTEL_TRACES_EXPORTER": "console", "OTEL_TRACES_SAMPLER": "sometimes"},
        {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "carrier-pigeon"},
        {"OTEL_SDK_DISABLED": "perhaps", "OTEL_TRACES_EXPORTER": "console"},
    ],
    ids=["exporter", "sampler-arg", "sampler", "protocol", "disabled"],
)
def test_a_bad_configuration_turns_tracing_off_with_a_warning(monkeypatch, caplog, env):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with caplog.at_level(logging.WARNING, "capsnet.tracing"), TestClient(create_app(Settings(intra_op_threads=1, warmup_runs=1))) as c:
        assert c.app.state.capsnet.tracing is None
        assert c.post("/predict", json={"pixels": _pixels()}).status_code == 200
    assert any("tracing is off" in r.getMessage() for r in caplog.records), caplog.text


def test_off_unless_an_exporter_is_named():
    with TestClient(create_app(Settings(intra_op_threads=1, warmup_runs=1))) as c:
        assert c.app.state.capsnet.tracing is None


def test_the_otel_variables_through_the_entry_point_with_ids_in_the_log():
    """`python -m service` with OTEL_TRACES_EXPORTER=console: the spans on stdout; a line logged while a request is
    served (the engine gone: a front whose remote engine, another instance, has stopped) names the request and its trace."""
    engine = Server({"CAPSNET_INTRA_OP_THREADS": "1"}).wait_ready()
    front = None
    try:
        env = {"CAPSNET_ENGINE_URL": engine.url, "OTEL_TRACES_EXPORTER": "console", "OTEL_SERVICE_NAME": "front-under-test"}
        front = Server(env).wait_ready()
        import httpx

        assert httpx.post(front.url + "/predict", json={"pixels": _pixels()}, timeout=30).status_code == 200
        engine.stop()
        r = httpx.post(front.url + "/predict", json={"pixels": _pixels()}, headers={"X-Request-ID": "lost-engine"}, timeout=30)
        assert r.status_code == 503
    finally:
        out = front.stop() if front is not None else ""
        engine.stop()
    assert "tracing on" in out
    line = next(line for line in out.splitlines() if "engine unavailable" in line)
    match = re.search(r"\[request lost-engine trace ([0-9a-f]{32})\]", line)
    assert match, line
    spans = [json.loads(doc) for doc in _json_documents(out)]
    names = {(s["name"], s["context"]["trace_id"]) for s in spans}
    assert ("POST /predict", "0x" + match.group(1)) in names
    assert all(s["resource"]["attributes"]["service.name"] == "front-under-test" for s in spans)
    assert {"preprocess", "queue", "predict", "postprocess", "body"} <= {s["name"] for s in spans}


def _json_documents(text: str) -> list[str]:
    """The console exporter's spans: pretty-printed JSON objects, one after another, among the log lines."""
    docs, depth, current = [], 0, []
    for line in text.splitlines():
        if depth == 0 and line != "{":
            continue
        current.append(line)
        depth += line.count("{") - line.count("}")
        if depth == 0:
            docs.append("\n".join(current))
            current = []
    return docs


class _OtlpReceiver:
    """A collector's two OTLP doors on loopback, as the exporters reach them: HTTP (POST /v1/traces, protobuf) and gRPC
    (TraceService/Export). What arrives is kept: (door, path, span names)."""

    def __init__(self) -> None:
        import threading
        from concurrent import futures
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        import grpc
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

        self.got: list[tuple[str, str, set[str]]] = []
        got = self.got

        def names(request: trace_service_pb2.ExportTraceServiceRequest) -> set[str]:
            return {s.name for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans}

        class Http(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                got.append(("http", self.path, names(trace_service_pb2.ExportTraceServiceRequest.FromString(body))))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()
                self.wfile.write(trace_service_pb2.ExportTraceServiceResponse().SerializeToString())

            def log_message(self, *args: object) -> None:
                pass

        class Grpc(trace_service_pb2_grpc.TraceServiceServicer):
            def Export(self, request, context):
                got.append(("grpc", "TraceService/Export", names(request)))
                return trace_service_pb2.ExportTraceServiceResponse()

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Http)
        threading.Thread(target=self.http.serve_forever, daemon=True).start()
        self.grpc = grpc.server(futures.ThreadPoolExecutor(2))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Grpc(), self.grpc)
        self.grpc_port = self.grpc.add_insecure_port("127.0.0.1:0")
        self.grpc.start()

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.http.server_address[1]}"

    def close(self) -> None:
        self.http.shutdown()
        self.grpc.stop(0)


@pytest.mark.parametrize(
    "protocol, where",
    [("http/protobuf", "base"), ("http/protobuf", "traces"), ("grpc", "base")],
    ids=["http-base-url", "http-traces-url", "grpc"],
)
def test_the_otlp_exporter_sends_where_the_variables_say(protocol, where):
    """OTEL_EXPORTER_OTLP_ENDPOINT is a base URL (HTTP: spans to its /v1/traces), OTEL_EXPORTER_OTLP_TRACES_ENDPOINT the
    very URL; with protocol grpc, the collector's gRPC address. A real receiver on loopback gets the request's spans."""
    import httpx

    receiver = _OtlpReceiver()
    try:
        env = {"OTEL_EXPORTER_OTLP_PROTOCOL": protocol, "OTEL_BSP_SCHEDULE_DELAY": "100", "CAPSNET_INTRA_OP_THREADS": "1"}
        if protocol == "grpc":
            env |= {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver.grpc_port}", "OTEL_EXPORTER_OTLP_INSECURE": "true"}
        elif where == "base":
            env["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.http_url
        else:
            env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = receiver.http_url + "/elsewhere/traces"
        server = Server(env).wait_ready()
        try:
            assert httpx.post(server.url + "/predict", json={"pixels": _pixels()}, timeout=30).status_code == 200
        finally:
            server.stop()  # the batch processor's last spans go out as the process stops
        door, path, names = receiver.got[-1]
        assert door == ("grpc" if protocol == "grpc" else "http")
        if door == "http":
            assert path == {"base": "/v1/traces", "traces": "/elsewhere/traces"}[where]
        assert {"POST /predict", "preprocess", "predict"} <= set().union(*(n for _, _, n in receiver.got))
    finally:
        receiver.close()
