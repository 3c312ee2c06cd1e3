"""POST /predict and /predict/batch: an image (or MNIST-like pixels) in, capsules out; POST /probe: the same for
transformed copies of what the network sees."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import numpy as np
from fastapi import APIRouter
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError

from model.affine import Affine, warp
from service.deps import BatchArgs, PredictArgs, ProbeModel, ReadyDep, Upload, WithPixels, capsnet_only, model_param
from service.engine.batcher import Inference
from service.engine.two_digit import NAME as PAIRS
from service.engine.two_digit import PairEngine
from service.errors import Invalid, NoRouting
from service.http.body import MULTIPART, Body, BodyRoute
from service.inputs.body_to_tensor import body_to_tensor
from service.phases import run_phases
from service.postprocess import PIXELS, PIXELS_DOC, PIXELS_PARAM, FastJSON, digit_answer, pair_answer, picture, rounded
from service.schemas import (
    ERRORS,
    BatchPrediction,
    ErrorBody,
    PairPrediction,
    PredictBatchJSON,
    Prediction,
    PredictJSON,
    Probe,
    ProbeJSON,
)
from service.state import AppState
from service.threads import in_thread

router = APIRouter(tags=["predict"], route_class=BodyRoute)
M = TypeVar("M", bound=BaseModel)


def _body_spec(json_model: type, multiple: bool | None) -> dict:
    """The request body as OpenAPI states it: JSON with the model's schema and examples, and multipart `file` parts unless
    `multiple` is None (JSON only). Nested models point into components/schemas, where the response schemas put them."""
    schema = json_model.model_json_schema(ref_template="#/components/schemas/{model}")
    schema.pop("$defs", None)
    examples = json_model.model_config.get("json_schema_extra", {}).get("examples", [])
    content: dict = {"application/json": {"schema": schema, "examples": {f"example{i}": {"value": v} for i, v in enumerate(examples)}}}
    if multiple is not None:
        file_schema = {"type": "string", "format": "binary"}
        files = {"type": "array", "items": file_schema} if multiple else file_schema
        content = {"multipart/form-data": {"schema": {"type": "object", "required": ["file"], "properties": {"file": files}}}, **content}
    return {"requestBody": {"required": True, "content": content}}


def _validated(document: Any, model: type[M]) -> M:
    """The JSON body (parsed once, by service.http.body) as `model`; its errors are a 422 as FastAPI reports a body's,
    each field located under `body` as a route with a body parameter locates it."""
    try:
        return model.model_validate(document)
    except ValidationError as e:
        errors = e.errors(include_input=False, include_url=False)
        raise RequestValidationError([{**err, "loc": ("body", *err["loc"])} for err in errors]) from e


async def _images(body: Body, state: AppState, batch: bool) -> np.ndarray:
    """All the inputs of one request to the MNIST network, as float32 [n,1,28,28]."""
    card, document = state.card, None
    if body.media_type != MULTIPART:
        document = _validated(body.json, PredictBatchJSON if batch else PredictJSON)
    limit = state.settings.max_batch_items if batch else 1
    return await body_to_tensor(body, document, state.settings, state.bounded_pool, card.image_size, card.digit_box, limit)


def _capsule_type(extras: set[str], routing_type: int | None, state: AppState) -> int | None:
    """The capsule type ?include=routing shows (None: the mean over types); checked before any work is done."""
    if "routing" not in extras:
        if routing_type is not None:
            raise Invalid("routing_type needs include=routing")
        return None
    if state.routing_inspector is None:
        raise NoRouting(f"no routing trace for model {state.card.version}: run `python -m model.routing`")
    return state.routing_inspector.capsule_type(routing_type)


async def _unroll_routing(
    out: dict[str, np.ndarray], extras: set[str], capsule_type: int | None, state: AppState
) -> tuple[dict[str, np.ndarray], int | None] | None:
    if "routing" not in extras:
        return None
    assert state.routing_inspector is not None
    return await in_thread(state.routing_inspector.unroll, out["primary"]), capsule_type


PREDICT_ERRORS = {**ERRORS, 404: {"model": ErrorBody, "description": "include=routing, but this model has no routing trace"}}


def _outputs(extras: set[str]) -> frozenset[str]:
    """The graph outputs `include` needs beyond those every answer reads: the coupling coefficients for the coupling
    maps, the primary capsules for the routing trace."""
    wanted = {"coupling": bool(extras & {"coupling", "coupling_grid"}), "primary": "routing" in extras}
    return frozenset(name for name, yes in wanted.items() if yes)


INCLUDE_DOC = (
    "comma-separated extras (or the parameter repeated): `coupling` adds the routing coefficients [1152][10] and their 6x6 map per digit "
    "`coupling_grid` [10][6][6]; `coupling_grid` adds only the map; `counterfactuals` adds the decoder's image from each "
    "digit capsule's own pose [10] (PNG), the images behind `recon_errors`; `routing` adds every iteration of dynamic routing "
    "(`routing`: lengths, coupling and agreement maps per iteration, run past the trained 3); " + PIXELS_DOC
)
ROUTING_TYPE_DOC = (
    "with include=routing: the primary capsule type (0-31) whose coupling and agreement the maps show; "
    "`mean` (the default) averages the 32 types"
)
# Parsed by service.deps from their types; documented here as clients know them.
INCLUDE_PARAM = {
    "name": "include",
    "in": "query",
    "required": False,
    "description": INCLUDE_DOC,
    "schema": {"anyOf": [{"type": "string"}, {"type": "null"}], "title": "Include"},
    "example": "coupling",
}


ROUTING_TYPE_PARAM = {
    "name": "routing_type",
    "in": "query",
    "required": False,
    "description": ROUTING_TYPE_DOC,
    "schema": {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 31}, {"const": "mean"}, {"type": "null"}], "title": "Routing Type"},
    "example": "mean",
}


MODEL_PARAM = model_param(
    "`capsnet` (the default): one digit; `multimnist`: two overlapping digits, answered as `PairPrediction` "
    "(of `include`, only `pixels` applies to it; routing_type is for capsnet only)"
)


def _with_include(spec: dict) -> dict:
    return {**spec, "parameters": [INCLUDE_PARAM, ROUTING_TYPE_PARAM]}


async def _predict_pair(body: Body, state: AppState, pairs: PairEngine, with_pixels: bool) -> FastJSON:
    path = "upload"  # how the input came, whose threshold tells one digit from two (model/pair_rule.py)

    async def preprocess() -> np.ndarray:
        """One upload as the two-digit network wants it: [1,1,36,36], the two digits' ink scaled together to the card's box,
        or, written apart, laid over each other as MultiMNIST's pairs are."""
        nonlocal path
        document = None if body.media_type == MULTIPART else _validated(body.json, PredictJSON)
        if document is not None:
            path = "pixels" if document.pixels is not None else "canvas" if document.source == "canvas" else "upload"
        frame = pairs.card.input
        pool, size = state.bounded_pool, pairs.card.image_size
        return await body_to_tensor(body, document, state.settings, pool, size, frame.pair_box, digit_box=frame.mnist_digit_box)

    async def answer(images: np.ndarray, inference: Inference) -> FastJSON:
        return FastJSON(pair_answer(pairs, inference.out, images[0], state.card.digit_rule, with_pixels, path))

    endpoint = f"/predict?model={PAIRS}"
    timed = await run_phases(state.metrics, endpoint, preprocess(), pairs.read, answer, body.parse_s, payloads=state.payload_log)
    return timed.result


def _batched(state: AppState, extras: set[str]) -> Callable[[np.ndarray], Awaitable[Inference]]:
    """The one-digit network through the batcher, fetching the outputs `extras` need."""
    return lambda images: state.batcher.submit(images, state.settings.request_timeout_s, fetch=_outputs(extras))


@router.post(
    "/predict",
    response_model=Prediction | PairPrediction,
    responses={
        **PREDICT_ERRORS,
        404: {"model": ErrorBody, "description": "include=routing without a routing trace, or a model not served"},
    },
    openapi_extra={**_body_spec(PredictJSON, multiple=False), "parameters": [INCLUDE_PARAM, ROUTING_TYPE_PARAM, MODEL_PARAM]},
    summary="Classify one digit (or, with ?model=multimnist, two overlapping ones): capsule lengths, poses, reconstruction",
)
async def predict(call: PredictArgs) -> FastJSON:
    """Send an image as multipart field `file`, as JSON `{"image": base64}`, or MNIST-like `{"pixels": 28x28}`.

    Images are made to look like MNIST first (ink bright on black, fit to 20x20, centred by mass);
    `pixels` go to the network as they are. With `?model=multimnist` the picture holds two digits (dark on light or light
    on dark, any size; `pixels` 36x36): drawn over each other, both are scaled together onto the 36x36 canvas; written
    apart (side by side, or one above the other), they are laid over each other there as MultiMNIST's pairs are. The
    answer names each digit the capsules find and redraws each from its own capsule."""
    body, state, extras = call.body, call.state, call.extras
    if call.pairs is not None:
        capsnet_only(extras, call.routing_type)
        return await _predict_pair(body, state, call.pairs, PIXELS in extras)
    capsule_type = _capsule_type(extras, call.routing_type, state)

    async def answer(images: np.ndarray, inference: Inference) -> FastJSON:
        routing = await _unroll_routing(inference.out, extras, capsule_type, state)
        verdicts = state.card.digit_rule.judge(images, inference.out)
        return FastJSON(digit_answer(inference.out, 0, images[0], state, extras, verdicts, routing))  # ~0.1 ms: cheaper than a thread hop

    images = _images(body, state, batch=False)
    timed = await run_phases(state.metrics, "/predict", images, _batched(state, extras), answer, body.parse_s, payloads=state.payload_log)
    return timed.result


@router.post(
    "/predict/batch",
    response_model=BatchPrediction,
    responses=PREDICT_ERRORS,
    openapi_extra=_with_include(_body_spec(PredictBatchJSON, multiple=True)),
    summary="Classify several digits in one request",
)
async def predict_batch(call: BatchArgs) -> FastJSON:
    """Several `file` parts, `{"images": [...]}` or `{"pixels": [N x 28 x 28]}`, up to the configured maximum (64)."""
    body, state, extras = call.body, call.state, call.extras
    capsule_type = _capsule_type(extras, call.routing_type, state)

    async def answer(images: np.ndarray, inference: Inference) -> FastJSON:
        out = inference.out
        routing = await _unroll_routing(out, extras, capsule_type, state)
        verdicts = state.card.digit_rule.judge(images, out)
        results = await in_thread(lambda: [digit_answer(out, i, images[i], state, extras, verdicts, routing) for i in range(len(images))])
        return FastJSON({"results": results})

    images = _images(body, state, batch=True)
    batched = _batched(state, extras)
    timed = await run_phases(state.metrics, "/predict/batch", images, batched, answer, body.parse_s, payloads=state.payload_log)
    return timed.result


@router.post(
    "/probe",
    response_model=Probe,
    responses=ERRORS,
    openapi_extra={**_body_spec(ProbeJSON, multiple=None), "parameters": [PIXELS_PARAM]},
    summary="Equivariance probe: capsules for affine transforms of the input",
)
async def probe(body: Upload, state: ReadyDep, with_pixels: WithPixels, _: ProbeModel) -> FastJSON:
    """The 28x28 input (from `image`, preprocessed as /predict does, or `pixels` as they are) rotated, scaled, sheared and
    shifted by each of up to 64 transforms (model/affine.py), each run through the network: how the lengths, the
    prediction and the poses follow the viewpoint. Equivariance would keep the lengths and move the poses."""
    req = _validated(body.json, ProbeJSON)  # JSON only: BodyRoute answers 415 to anything else
    transforms = [Affine(**t.model_dump()) for t in req.transforms]

    async def preprocess() -> tuple[np.ndarray, np.ndarray]:
        base = (await body_to_tensor(body, req, state.settings, state.bounded_pool, state.card.image_size, state.card.digit_box))[0, 0]
        images = await in_thread(lambda: np.stack([warp(base, t) for t in transforms])[:, None].astype(np.float32))
        return base, images

    def model(inputs: tuple[np.ndarray, np.ndarray]) -> Awaitable[Inference]:
        return state.batcher.submit(inputs[1], state.settings.request_timeout_s, explain=False)  # lengths and poses only

    async def answer(inputs: tuple[np.ndarray, np.ndarray], inference: Inference) -> FastJSON:
        (base, images), out = inputs, inference.out

        def encode() -> dict[str, Any]:
            return {
                "input": picture(base, with_pixels),
                "results": [
                    {
                        "transform": t.model_dump(),
                        "prediction": int(out["lengths"][i].argmax()),
                        "lengths": rounded(out["lengths"][i]),
                        "poses": rounded(out["poses"][i]),
                        "input": picture(images[i, 0], with_pixels),
                    }
                    for i, t in enumerate(req.transforms)
                ],
            }

        return FastJSON(await in_thread(encode))

    return (await run_phases(state.metrics, "/probe", preprocess(), model, answer, body.parse_s, payloads=state.payload_log)).result
