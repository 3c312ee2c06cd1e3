"""The Open Inference Protocol (KServe v2, Triton's HTTP/REST API) for the graphs, `capsnet` and `decoder`, and where the
card has it, the two-digit network's `multimnist` and `multimnist-decoder` (service/engine/two_digit.py).

Why: a client written for Triton or KServe (tritonclient, KServe's own) talks to this service unchanged, and the same
client code serves both while the models move to Triton (deploy/triton serves the same two graphs under the same names).
The tensors are the graphs' own inputs and outputs, fed as they are, with no image preprocessing: this is the engine,
as Triton runs it. `capsnet` goes through the same batcher as /predict (same batches, queue limit, 503 when full) and
answers only the graph's outputs, not the service's counterfactuals; `decoder` runs in a thread as /reconstruct does.

Besides the core protocol: Triton's model configuration (`.../config`) and statistics (`.../stats`) extensions and the
binary tensor data extension (service/oip/codec.py). Errors on these routes are the protocol's `{"error": message}` with the
status Triton gives (400 invalid, 404 unknown model or version, 503 loading or overloaded); the rest of the service
keeps its own error body. A method a path does not take, or a path under /v2 that is none of these, is a 405 or 404
in the protocol's body too (service/errors.install_handlers). What is not HTTP (which models, how each runs, its
configuration and statistics, how a failure is worded) is in service/oip/registry.py, which the gRPC server calls too.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Coroutine
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Depends, Path, Request, Response
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError

from service.deps import ServingDep, StateDep
from service.engine.batcher import Inference
from service.errors import is_protocol
from service.http.body import read_limited
from service.oip import registry
from service.oip.codec import HEADER_LENGTH, InferRequest, bad, decompress, encode_response, parse_request
from service.oip.registry import VERSION
from service.oip.schemas import (
    InferenceRequest,
    InferenceResponse,
    ModelMetadata,
    ModelReady,
    ModelStatistics,
    OIPErrorBody,
    RepositoryIndexRequest,
    RepositoryLoadRequest,
    RepositoryModel,
    ServerLive,
    ServerMetadata,
    ServerReady,
    TritonModelConfig,
)
from service.oip.triton_config import to_json
from service.state import OIP_MODELS, AppState
from service.threads import off_loop

log = logging.getLogger("capsnet.oip")

# Documented as the names there are (a generated client, or schemathesis, then sends real ones); not validated as an
# enum, so that another name is the protocol's 404, not a 422
_MODEL_DOC = "capsnet, decoder, multimnist or multimnist-decoder"
ModelName = Annotated[str, Path(description=_MODEL_DOC, json_schema_extra={"enum": list(OIP_MODELS)})]
ModelVersion = Annotated[str, Path(description=f"the only version, {VERSION}", json_schema_extra={"enum": [VERSION]})]


# ---- errors: the protocol's body on these routes ----


class OIPRoute(APIRoute):
    """A route whose failures are answered in the protocol's own error body, whatever raised them."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handle = super().get_route_handler()

        async def answered(request: Request) -> Response:
            try:
                return await handle(request)
            except Exception as e:
                status, message, headers = registry.failure(e, f"{request.method} {request.url.path}")
                return JSONResponse({"error": message}, status_code=status, headers=headers)

        return answered


def protocol_errors_only(schema: dict[str, Any]) -> dict[str, Any]:
    """The OpenAPI document with FastAPI's 422, which it lists on every route that takes parameters, taken off the
    protocol's routes: they answer a request that fails validation 400 in the protocol's error body (registry.failure),
    and document that 400 where a request can fail so."""
    for path, operations in schema["paths"].items():
        if is_protocol(path):
            for operation in operations.values():
                operation.get("responses", {}).pop("422", None)
    return schema


router = APIRouter(tags=["open inference protocol"], route_class=OIPRoute)
ERRORS = {
    400: {"model": OIPErrorBody, "description": "invalid request: unknown input or output, wrong shape, datatype or byte size"},
    404: {"model": OIPErrorBody, "description": "unknown model or version"},
    503: {"model": OIPErrorBody, "description": "the model is loading, or its queue is full; see Retry-After"},
}
NOT_FOUND = {404: ERRORS[404]}


# ---- server ----


@router.get("/v2", response_model=ServerMetadata, summary="Server metadata: name, version, protocol extensions")
async def server_metadata(request: Request) -> JSONResponse:
    return JSONResponse({"name": request.app.title, "version": request.app.version, "extensions": registry.EXTENSIONS})


router.add_api_route("/v2/", server_metadata, methods=["GET"], include_in_schema=False)  # the spec's spelling; tritonclient asks /v2


# the bodies are the KServe v2 REST protocol's (kserve's client reads them; tritonclient reads the status alone)
LIVE, READY = b'{"live":true}', b'{"ready":true}'


@router.get("/v2/health/live", response_model=ServerLive, summary='Server live: the process answers (200, {"live": true})')
async def server_live() -> Response:
    return Response(LIVE, media_type="application/json")


@router.get(
    "/v2/health/ready",
    response_model=ServerReady,
    responses={503: ERRORS[503]},
    summary='Server ready: every model loaded and warm (200, {"ready": true}); 503 before',
)
async def server_ready(state: StateDep) -> Response:
    await registry.server_ready(state)
    return Response(READY, media_type="application/json")


@router.get("/v2/models/stats", response_model=ModelStatistics, summary="Inference statistics of every model (Triton's extension)")
async def all_stats(state: StateDep) -> JSONResponse:
    return JSONResponse({"model_stats": registry.statistics(state, "", "")})


# ---- the model repository extension (service/oip/registry.py; the weights directory is the repository) ----


B = TypeVar("B", bound=BaseModel)


async def _optional_body(request: Request, state: AppState, model: type[B]) -> B:
    """The body as `model`, whatever its media type (tritonclient sends none), or the model's defaults when there is none."""
    data = await read_limited(request, state.settings)
    try:
        return model.model_validate_json(data) if data.strip() else model()
    except ValidationError as e:
        raise bad(f"invalid request body: {e.errors()[0]['msg']}") from None


def _body_doc(model: type[BaseModel]) -> dict[str, Any]:
    return {"requestBody": {"required": False, "content": {"application/json": {"schema": model.model_json_schema()}}}}


@router.post(
    "/v2/repository/index",
    response_model=list[RepositoryModel],
    summary="The models in the repository, each with its state (READY, UNAVAILABLE and why, LOADING)",
    openapi_extra=_body_doc(RepositoryIndexRequest),
)
async def repository_index(request: Request, state: StateDep) -> JSONResponse:
    body = await _optional_body(request, state, RepositoryIndexRequest)
    return JSONResponse(registry.repository_index(state, body.ready))


@router.post(
    "/v2/repository/models/{model_name}/load",
    responses={
        400: {"model": OIPErrorBody, "description": "the load failed (why), or overrides were sent; the version serving goes on"},
        404: ERRORS[404],
        503: ERRORS[503],
    },
    summary="Load the weights directory again, checked and warmed, and swap it in without downtime",
    openapi_extra=_body_doc(RepositoryLoadRequest),
)
async def repository_load(request: Request, model_name: ModelName, state: ServingDep) -> Response:
    """Every model reloads together (one card describes them all), whichever is named; one that was unloaded is served
    again. Requests in flight finish on the version they began on."""
    body = await _optional_body(request, state, RepositoryLoadRequest)
    await registry.load(state, model_name, overrides=list(body.parameters))
    return Response(status_code=200)


@router.post(
    "/v2/repository/models/{model_name}/unload", responses=NOT_FOUND, summary="Take a model out of service until it is loaded again"
)
async def repository_unload(model_name: ModelName, state: ServingDep) -> Response:
    await registry.unload(state, model_name)
    return Response(status_code=200)


# ---- one model: each endpoint with and without the version ----


def _metadata(state: AppState, name: str, version: str) -> JSONResponse:
    return JSONResponse(registry.spec(state, name, version).metadata(VERSION))


def _ready(state: AppState, name: str, version: str) -> JSONResponse:
    return JSONResponse({"name": registry.spec(state, name, version).name, "ready": True})


def _config(state: AppState, name: str, version: str) -> JSONResponse:
    return JSONResponse(to_json(registry.config(state, name, version)))


def _model_stats(state: AppState, name: str, version: str) -> JSONResponse:
    return JSONResponse({"model_stats": registry.statistics(state, name, version)})


async def _infer(request: Request, state: AppState, name: str, version: str) -> Response:
    """Read and check the tensors, run the model, encode what was asked for (service/oip/registry.py times and counts it)."""
    model = registry.spec(state, name, version)
    s = state.settings
    encoding, header_length = request.headers.get("content-encoding"), request.headers.get(HEADER_LENGTH)

    def parse(data: bytes) -> InferRequest:
        return parse_request(model, decompress(data, encoding, s.max_body_bytes), header_length, s.max_json_values)

    async def receive() -> tuple[Any, float]:
        read_from = time.perf_counter()
        data = await read_limited(request, s)  # the body's arrival is the client's time, not preprocessing (as on REST)
        return off_loop(state.bounded_pool, s.inline_parse_bytes, parse, data), time.perf_counter() - read_from

    async def encode(req: InferRequest, inference: Inference) -> Response:
        out = inference.out
        content, length = encode_response(model, VERSION, req.id, [(t, out[t.name], binary) for t, binary in req.outputs])
        if length is None:
            return Response(content, media_type="application/json")
        return Response(content, media_type="application/octet-stream", headers={HEADER_LENGTH: str(length)})

    return await registry.infer(state, model, f"/v2/models/{model.name}/infer", receive, encode)


def _inline(schema: dict[str, Any]) -> dict[str, Any]:
    """A pydantic schema with its `$defs` written in place: a request body in openapi_extra cannot point at them."""
    defs = schema.pop("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref", "")
            return walk(defs[ref.rsplit("/", 1)[-1]]) if ref.startswith("#/$defs/") else {k: walk(v) for k, v in node.items()}
        return [walk(v) for v in node] if isinstance(node, list) else node

    return walk(schema)


BINARY = {"schema": {"type": "string", "format": "binary"}}
INFER_DOC = {
    "parameters": [
        {
            "name": HEADER_LENGTH,
            "in": "header",
            "required": False,
            "schema": {"type": "integer", "minimum": 0},
            "description": "binary tensor data extension: the JSON header's length in bytes; the inputs' raw little-endian "
            "bytes follow it, in input order (parameters.binary_data_size each)",
        }
    ],
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": _inline(InferenceRequest.model_json_schema())}, "application/octet-stream": BINARY},
    },
}
INFER_RESPONSES = {
    200: {
        "description": "the outputs; with any output in binary, a JSON header of Inference-Header-Content-Length bytes "
        "and then their bytes",
        "content": {"application/octet-stream": BINARY},
    },
    **ERRORS,
}


async def _versioned(model_version: ModelVersion) -> None:
    """Declares `{model_version}` on a versioned path, documented and checked as a path parameter; the handler, one for
    both paths, reads it from the path (request.path_params), where the unversioned path has none."""


def _version(request: Request) -> str:
    return request.path_params.get("model_version", "")


def _both(method: str, tail: str, endpoint: Callable[..., Any], names: tuple[str, str], summaries: tuple[str, str], **kw: Any) -> None:
    """`endpoint` on /v2/models/{model_name}<tail> and on /v2/models/{model_name}/versions/{model_version}<tail>, each
    route named as it was when each path had a function of its own (so /openapi.json's operationIds stay as they were)."""
    router.add_api_route(f"/v2/models/{{model_name}}{tail}", endpoint, methods=[method], name=names[0], summary=summaries[0], **kw)
    router.add_api_route(
        f"/v2/models/{{model_name}}/versions/{{model_version}}{tail}",
        endpoint,
        methods=[method],
        name=names[1],
        summary=summaries[1],
        dependencies=[Depends(_versioned)],
        **kw,
    )


async def model_metadata(request: Request, model_name: ModelName, state: StateDep) -> JSONResponse:
    return _metadata(state, model_name, _version(request))


async def model_ready(request: Request, model_name: ModelName, state: StateDep) -> JSONResponse:
    return _ready(state, model_name, _version(request))


async def model_config(request: Request, model_name: ModelName, state: StateDep) -> JSONResponse:
    return _config(state, model_name, _version(request))


async def model_stats(request: Request, model_name: ModelName, state: StateDep) -> JSONResponse:
    return _model_stats(state, model_name, _version(request))


async def infer(request: Request, model_name: ModelName, state: StateDep) -> Response:
    """`capsnet`: `image` FP32 [N,1,28,28] (N <= CAPSNET_MAX_BATCH) -> `lengths`, `poses`, `reconstruction`, `coupling`;
    `decoder`: `digit` INT64 [N] and `pose` FP32 [N,16] -> `reconstruction`; `multimnist`: `image` FP32 [N,1,36,36] ->
    `lengths`, `poses`, `reconstructions` [N,2,1,36,36]; `multimnist-decoder`: as `decoder`, 36x36. Any media type
    (tritonclient sends none): the `Inference-Header-Content-Length` header says whether binary tensor data follows."""
    return await _infer(request, state, model_name, _version(request))


# (path tail, endpoint, operation names, summaries, response schema, errors) of each GET on one model
for _tail, _endpoint, _names, _summaries, _schema, _errors in (
    (
        "",
        model_metadata,
        ("model_metadata", "model_version_metadata"),
        ("Model metadata: inputs and outputs", "Model metadata of one version"),
        ModelMetadata,
        ERRORS,
    ),
    (
        "/ready",
        model_ready,
        ("model_ready", "model_version_ready"),
        ("Model ready (200, its name and ready: true)", "Model version ready (200, its name and ready: true)"),
        ModelReady,
        ERRORS,
    ),
    (
        "/config",
        model_config,
        ("model_config", "model_version_config"),
        ("Triton's model configuration (model_config.proto as JSON)", "Triton's model configuration of one version"),
        TritonModelConfig,
        ERRORS,
    ),
    (
        "/stats",
        model_stats,
        ("model_stats", "model_version_stats"),
        ("Inference statistics of one model (Triton's statistics extension)", "Inference statistics of one model version"),
        ModelStatistics,
        NOT_FOUND,
    ),
):
    _both("GET", _tail, _endpoint, _names, _summaries, response_model=_schema, responses=_errors)
_both("POST", "/infer", infer, ("infer", "infer_version"),
      ("Inference: JSON tensors or the binary tensor data extension", "Inference on one model version"),
      response_model=InferenceResponse, responses=INFER_RESPONSES, openapi_extra=INFER_DOC)  # fmt: skip
