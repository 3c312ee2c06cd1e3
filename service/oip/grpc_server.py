"""The Open Inference Protocol over gRPC: Triton's GRPCInferenceService on CAPSNET_GRPC_PORT, beside the REST API.

Why gRPC as well as REST: Triton and KServe clients speak both, and gRPC's binary framing spares a batch of tensors the
JSON (or the binary extension's header) on every call; a client written against Triton's gRPC endpoint (tritonclient.grpc,
perf_analyzer -i grpc) talks to this service unchanged. Why Triton's own service definition: the stubs that ship with
tritonclient (tritonclient.grpc.service_pb2, service_pb2_grpc) are generated from Triton's grpc_service.proto and
kept by its maintainers, so the wire format is Triton's by construction, not a copy of it.

One service behind both transports: every call runs in the app's event loop on the app's state, through the same
functions as /v2 (service/oip/registry.py): the same models, batcher, queue limit and timeouts, the same failures with
the status the service's one error table gives them (service/errors.py: GRPC_CODES is its gRPC column), the same
per-model statistics, and on /metrics the same counters (`capsnet_requests_total` with method "GRPC", the endpoint the
gRPC method's path, the status its gRPC code) and phase histograms (endpoint `grpc:/v2/models/<model>/infer`). A message
larger than CAPSNET_MAX_BODY_BYTES is refused by gRPC itself before it is read (RESOURCE_EXHAUSTED).

Served: ServerLive, ServerReady, ModelReady, ServerMetadata, ModelMetadata, ModelConfig, ModelStatistics, ModelInfer and
the model repository's RepositoryIndex, RepositoryModelLoad and RepositoryModelUnload (service/loading.py: new weights
without downtime); beside them grpc.health.v1's Check and Watch (for "" and the inference service: SERVING once the
models are warm, NOT_SERVING from the start of a drain) and server reflection. Each call holds the version of the
weights it began on (AppState.pinned). The shared-memory, trace and log RPCs are Triton's server administration, which
this service does not have, and ModelStreamInfer (for decoupled models and sequences, which it has neither):
UNIMPLEMENTED.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc
from google.protobuf import json_format
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from opentelemetry.trace import SpanKind
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc

from service.engine.batcher import Inference
from service.errors import grpc_code
from service.http.auth import allowed, bearer
from service.metrics import PROGRESS, Progress
from service.oip import registry
from service.oip.codec import InferRequest, ModelSpec, OIPError
from service.oip.grpc_codec import encode_infer, parse_infer
from service.oip.registry import VERSION
from service.oip.triton_config import PLATFORM
from service.state import AppState
from service.tracing import GRPC_PROBES, request_id

log = logging.getLogger("capsnet.grpc")
T = TypeVar("T")

SERVICE = "inference.GRPCInferenceService"
# the codes OpenTelemetry's semantic conventions count as a server's error (the others are the client's)
SERVER_ERRORS = frozenset({"UNKNOWN", "DEADLINE_EXCEEDED", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS"})


def _metadata(context: grpc.aio.ServicerContext) -> list[tuple[str, str]]:
    return [(k, v) for k, v in context.invocation_metadata() or () if isinstance(v, str)]


class InferenceServicer(service_pb2_grpc.GRPCInferenceServiceServicer):
    """Each RPC as /v2 answers it, through service/oip/registry.py."""

    def __init__(self, state: AppState, name: str, version: str) -> None:
        self.state, self.name, self.version = state, name, version

    async def _answer(self, method: str, context: grpc.aio.ServicerContext, work: Callable[[], Awaitable[T]]) -> T:
        """`work`, counted and traced as EdgeMiddleware counts and traces an HTTP request; a failure becomes the gRPC
        status the error table gives it, with the message the REST body would carry."""
        state, metrics = self.state, self.state.metrics
        metadata = _metadata(context)
        given = next((v for k, v in metadata if k == "x-request-id"), None)
        progress = Progress(request_id(given) if given is not None else None)
        tracing = state.tracing
        if tracing is not None and method not in GRPC_PROBES:
            attributes = {"rpc.system": "grpc", "rpc.service": SERVICE, "rpc.method": method}
            progress.trace = tracing.start(f"{SERVICE}/{method}", SpanKind.SERVER, attributes, metadata, progress)
        token = PROGRESS.set(progress)
        start, code = time.perf_counter(), "OK"
        try:
            with metrics.serving():
                return await work()
        except asyncio.CancelledError:  # the client cancelled, or its deadline passed: nobody is there to answer
            code, progress.gone = "CANCELLED", True
            raise
        except Exception as e:
            status, message, headers = registry.failure(e, f"gRPC {method}")
            code = grpc_code(status)
            if headers and "Retry-After" in headers:
                context.set_trailing_metadata((("retry-after", headers["Retry-After"]),))
            await context.abort(grpc.StatusCode[code], message)
            raise  # abort raised already; this line is for the type checker
        finally:
            PROGRESS.reset(token)
            endpoint = f"/{SERVICE}/{method}"
            if progress.gone:
                metrics.abandoned.labels(progress.phase).inc()
            metrics.requests.labels(endpoint, "GRPC", code).inc()
            metrics.latency.labels(endpoint).observe(time.perf_counter() - start)
            if progress.trace is not None:
                progress.trace.end({"rpc.grpc.status_code": grpc.StatusCode[code].value[0]}, code in SERVER_ERRORS)

    # ---- health ----

    async def ServerLive(self, request: pb.ServerLiveRequest, context: grpc.aio.ServicerContext) -> pb.ServerLiveResponse:
        return await self._answer("ServerLive", context, _constant(pb.ServerLiveResponse(live=True)))

    async def ServerReady(self, request: pb.ServerReadyRequest, context: grpc.aio.ServicerContext) -> pb.ServerReadyResponse:
        async def ready() -> pb.ServerReadyResponse:
            try:
                await registry.server_ready(self.state.pinned())
            except OIPError as e:
                if e.status != 503:
                    raise
                return pb.ServerReadyResponse(ready=False)
            return pb.ServerReadyResponse(ready=True)

        return await self._answer("ServerReady", context, ready)

    async def ModelReady(self, request: pb.ModelReadyRequest, context: grpc.aio.ServicerContext) -> pb.ModelReadyResponse:
        async def ready() -> pb.ModelReadyResponse:
            try:
                registry.spec(self.state.pinned(), request.name, request.version)
            except OIPError as e:
                if e.status not in (400, 404, 503):
                    raise
                # not ready, rather than an error, as Triton answers for a model it does not have or has unloaded (and
                # as tritonclient's is_model_ready reads a 404 or a 400 over REST)
                return pb.ModelReadyResponse(ready=False)
            return pb.ModelReadyResponse(ready=True)

        return await self._answer("ModelReady", context, ready)

    # ---- metadata, configuration, statistics ----

    async def ServerMetadata(self, request: pb.ServerMetadataRequest, context: grpc.aio.ServicerContext) -> pb.ServerMetadataResponse:
        answer = pb.ServerMetadataResponse(name=self.name, version=self.version, extensions=registry.EXTENSIONS)
        return await self._answer("ServerMetadata", context, _constant(answer))

    async def ModelMetadata(self, request: pb.ModelMetadataRequest, context: grpc.aio.ServicerContext) -> pb.ModelMetadataResponse:
        async def metadata() -> pb.ModelMetadataResponse:
            spec = registry.spec(self.state.pinned(), request.name, request.version)
            tensor = pb.ModelMetadataResponse.TensorMetadata
            return pb.ModelMetadataResponse(
                name=spec.name,
                versions=[VERSION],
                platform=PLATFORM,
                inputs=[tensor(name=t.name, datatype=t.datatype, shape=t.shape) for t in spec.inputs],
                outputs=[tensor(name=t.name, datatype=t.datatype, shape=t.shape) for t in spec.outputs],
            )

        return await self._answer("ModelMetadata", context, metadata)

    async def ModelConfig(self, request: pb.ModelConfigRequest, context: grpc.aio.ServicerContext) -> pb.ModelConfigResponse:
        async def config() -> pb.ModelConfigResponse:
            return pb.ModelConfigResponse(config=registry.config(self.state.pinned(), request.name, request.version))

        return await self._answer("ModelConfig", context, config)

    async def ModelStatistics(self, request: pb.ModelStatisticsRequest, context: grpc.aio.ServicerContext) -> pb.ModelStatisticsResponse:
        async def statistics() -> pb.ModelStatisticsResponse:
            found = registry.statistics(self.state.pinned(), request.name, request.version)
            return pb.ModelStatisticsResponse(model_stats=[json_format.ParseDict(s, pb.ModelStatistics()) for s in found])

        return await self._answer("ModelStatistics", context, statistics)

    # ---- inference ----

    async def ModelInfer(self, request: pb.ModelInferRequest, context: grpc.aio.ServicerContext) -> pb.ModelInferResponse:
        state = self.state.pinned()

        async def infer() -> pb.ModelInferResponse:
            model = registry.spec(state, request.model_name, request.model_version)

            async def receive() -> tuple[Awaitable[InferRequest], float]:
                return self._parse(model, request), 0.0  # the message is in: gRPC read it before the call began

            async def encode(req: InferRequest, inference: Inference) -> pb.ModelInferResponse:
                return encode_infer(model, VERSION, req.id, [(t, inference.out[t.name]) for t, _ in req.outputs])

            return await registry.infer(state, model, f"grpc:/v2/models/{model.name}/infer", receive, encode)

        return await self._answer("ModelInfer", context, infer)

    # ---- the model repository ----

    async def RepositoryIndex(self, request: pb.RepositoryIndexRequest, context: grpc.aio.ServicerContext) -> pb.RepositoryIndexResponse:
        async def index() -> pb.RepositoryIndexResponse:
            entries = registry.repository_index(self.state.pinned(), request.ready)
            return pb.RepositoryIndexResponse(models=[pb.RepositoryIndexResponse.ModelIndex(**e) for e in entries])

        return await self._answer("RepositoryIndex", context, index)

    async def RepositoryModelLoad(
        self, request: pb.RepositoryModelLoadRequest, context: grpc.aio.ServicerContext
    ) -> pb.RepositoryModelLoadResponse:
        async def load() -> pb.RepositoryModelLoadResponse:
            await registry.load(self.state, request.model_name, overrides=list(request.parameters))
            return pb.RepositoryModelLoadResponse()

        return await self._answer("RepositoryModelLoad", context, load)

    async def RepositoryModelUnload(
        self, request: pb.RepositoryModelUnloadRequest, context: grpc.aio.ServicerContext
    ) -> pb.RepositoryModelUnloadResponse:
        async def unload() -> pb.RepositoryModelUnloadResponse:
            await registry.unload(self.state, request.model_name)
            return pb.RepositoryModelUnloadResponse()

        return await self._answer("RepositoryModelUnload", context, unload)

    async def _parse(self, model: ModelSpec, request: pb.ModelInferRequest) -> InferRequest:
        """Typed values are turned into arrays in the decode pool once the message is large (as a large REST body is
        parsed there); raw bytes are read in place, which costs next to nothing."""
        state = self.state
        if request.raw_input_contents:
            return parse_infer(model, request)
        size = request.ByteSize()
        if size <= state.settings.inline_parse_bytes:
            return parse_infer(model, request)
        return await state.bounded_pool.run(lambda: parse_infer(model, request), size)


def _unimplemented(method: str) -> Callable[..., Awaitable[Any]]:
    async def refuse(self: InferenceServicer, request: Any, context: grpc.aio.ServicerContext) -> Any:
        async def work() -> Any:
            raise OIPError(501, f"{method} is Triton's server administration, which this service does not have")

        return await self._answer(method, context, work)

    return refuse


# Counted and answered as any other failure, rather than the generated servicer's NotImplementedError (logged as a crash)
for _method in (
    "ModelStreamInfer",
    "SystemSharedMemoryStatus",
    "SystemSharedMemoryRegister",
    "SystemSharedMemoryUnregister",
    "CudaSharedMemoryStatus",
    "CudaSharedMemoryRegister",
    "CudaSharedMemoryUnregister",
    "TraceSetting",
    "LogSettings",
):
    setattr(InferenceServicer, _method, _unimplemented(_method))


def _constant(answer: T) -> Callable[[], Awaitable[T]]:
    async def give() -> T:
        return answer

    return give


class KeyInterceptor(grpc.aio.ServerInterceptor):
    """With API keys (service/http/auth.py), every call but health and reflection needs `authorization: Bearer <key>` in
    its metadata; without it, UNAUTHENTICATED."""

    OPEN = ("/grpc.health.v1.Health/", "/grpc.reflection.")

    def __init__(self, keys: tuple[bytes, ...]) -> None:
        self.keys = keys

        async def deny(request: Any, context: grpc.aio.ServicerContext) -> None:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "this server wants an API key: authorization: Bearer <key>")

        self.deny = grpc.unary_unary_rpc_method_handler(deny)

    async def intercept_service(self, continuation: Callable[..., Awaitable[Any]], details: grpc.HandlerCallDetails) -> Any:
        token = bearer(next((v for k, v in details.invocation_metadata or () if k == "authorization"), None))
        if details.method.startswith(self.OPEN) or allowed(token, self.keys):
            return await continuation(details)
        return self.deny


class GrpcServer:
    """grpc.aio's server in the app's event loop, started and stopped by the app's lifespan (service/app.py)."""

    def __init__(self, state: AppState, name: str, version: str, shared_port: bool = False) -> None:
        """`shared_port`: one of several worker processes, which all bind the port and among which the kernel spreads
        connections (service/processes.py)."""
        self.state = state
        self.server = grpc.aio.server(
            interceptors=[KeyInterceptor(state.api_keys)] if state.api_keys else [],
            options=[
                # a message over the body limit is refused before it is read, as a REST body over it is
                ("grpc.max_receive_message_length", state.settings.max_body_bytes),
                ("grpc.max_send_message_length", -1),
                # alone, a second process must not bind the same port and take half the connections
                ("grpc.so_reuseport", int(shared_port)),
            ],
        )
        service_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(InferenceServicer(state, name, version), self.server)
        # grpc.health.v1, what Kubernetes' gRPC probe and grpc_health_probe ask, for the server ("") and the service by
        # name; and reflection, so that grpcurl and Postman find the services without the .proto files
        self.health = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        reflection.enable_server_reflection((SERVICE, health.SERVICE_NAME, reflection.SERVICE_NAME), self.server)
        self.port = 0
        self._stopped: asyncio.Future | None = None  # the server's stop, once a drain has begun

    async def start(self, host: str, port: int) -> None:
        address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        try:
            self.port = self.server.add_insecure_port(address)
        except RuntimeError as e:
            log.error("cannot listen for gRPC on %s: %s", address, e)
            raise
        if not self.port:
            raise RuntimeError(f"cannot listen for gRPC on {address}")
        await self.server.start()
        serving = health_pb2.HealthCheckResponse.SERVING if self.state.ready else health_pb2.HealthCheckResponse.NOT_SERVING
        for service in ("", SERVICE):
            await self.health.set(service, serving)
        log.info("gRPC (the Open Inference Protocol, %s) on %s", SERVICE, address)

    async def ready(self) -> None:
        """The models are warm: health says SERVING (a server started before they are says NOT_SERVING until then)."""
        for service in ("", SERVICE):
            await self.health.set(service, health_pb2.HealthCheckResponse.SERVING)

    async def draining(self, grace_s: float) -> None:
        """The drain has begun (HTTP takes no more connections): health says NOT_SERVING to every check and watcher from
        now on, so that a balancer stops sending, then new calls are refused and those in flight get `grace_s` to finish,
        beside HTTP's requests in flight rather than after them: one grace period for both, which the orchestrator's
        (docker-compose.yml's stop_grace_period, the pod's terminationGracePeriodSeconds) is set above."""
        await self.health.enter_graceful_shutdown()
        if self._stopped is None:
            self._stopped = asyncio.ensure_future(self.server.stop(grace_s))

    async def stop(self, grace_s: float) -> None:
        """The drain, if it has not begun; then until the calls in flight are done or their grace is over."""
        await self.draining(grace_s)
        assert self._stopped is not None
        await self._stopped
