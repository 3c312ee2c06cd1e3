"""POST /predict and /predict/batch: an image (or MNIST-like pixels) in, capsules out."""
from __future__ import annotations

import json
from typing import Any

import numpy as np
from anyio import to_thread
from fastapi import APIRouter, Depends, Request
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from service.errors import BadInput, Invalid
from service.imaging import decode_base64, decode_image
from service.multipart import file_parts
from service.preprocess import to_mnist
from service.responses import FastJSON, picture, rounded
from service.schemas import ERRORS, BatchPrediction, PredictBatchJSON, PredictJSON, Prediction
from service.state import AppState, ready_state

router = APIRouter(tags=["predict"])


def _body_spec(json_model: type, multiple: bool) -> dict:
    file_schema = {"type": "string", "format": "binary"}
    return {"requestBody": {"required": True, "content": {
        "multipart/form-data": {"schema": {"type": "object", "required": ["file"], "properties": {
            "file": {"type": "array", "items": file_schema} if multiple else file_schema}}},
        "application/json": {"schema": json_model.model_json_schema(), "examples": {
            f"example{i}": {"value": v} for i, v in enumerate(json_model.model_config.get("json_schema_extra", {}).get("examples", []))}},
    }}}


INLINE_BYTES = 256 * 1024  # uploads up to this size are decoded on the event loop (~0.1 ms); larger ones in a thread


async def _preprocess_all(blobs: list[bytes], state: AppState) -> np.ndarray:
    """Decode and preprocess off the event loop when it could take long; a thread hop costs more than a small PNG."""
    work = lambda: np.stack([_preprocess_bytes(b, state) for b in blobs])[:, None]  # noqa: E731
    return work() if sum(map(len, blobs)) <= INLINE_BYTES else await to_thread.run_sync(work)


def _preprocess_bytes(data: bytes, state: AppState) -> np.ndarray:
    pixels, alpha = decode_image(data, state.settings.max_image_pixels)
    return to_mnist(pixels, alpha, state.card.image_size, state.card.digit_box)


def _pixel_array(nested: list, state: AppState, what: str, ndim: int) -> np.ndarray:
    """Nested lists -> float32 [..., S, S]; ragged or mis-sized input is a 422 naming the shape expected."""
    s = state.card.image_size
    try:
        arr = np.array(nested, dtype=np.float32)
    except ValueError:
        arr = None
    if arr is None or arr.ndim != ndim or arr.shape[-2:] != (s, s):
        got = "ragged rows" if arr is None else f"shape {list(arr.shape)}"
        raise Invalid(f"{what} must be {s} rows of {s} numbers each, got {got}")
    return arr


def _parse_json(body: bytes, model: type) -> Any:
    try:
        obj = json.loads(body)
    except (ValueError, RecursionError) as e:
        raise BadInput(f"request body is not valid JSON: {e}") from e
    try:
        return model.model_validate(obj)
    except ValidationError as e:
        raise RequestValidationError(e.errors(include_input=False, include_url=False)) from e


async def _images(request: Request, state: AppState, batch: bool) -> np.ndarray:
    """All the inputs of one request as float32 [n,1,S,S], validated and preprocessed off the event loop."""
    limit = state.settings.max_batch_items if batch else 1
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    body = await request.body()
    if ctype == "multipart/form-data":
        return await _preprocess_all(file_parts(body, request.headers["content-type"], "file", limit), state)
    if batch:
        req = _parse_json(body, PredictBatchJSON)
        items = req.images if req.images is not None else req.pixels
        if not items:
            raise Invalid("the batch is empty")
        if len(items) > limit:
            raise Invalid(f"{len(items)} images, at most {limit} per request")
        if req.pixels is not None:
            return _pixel_array(req.pixels, state, "each item of pixels", 3)[:, None]
        blobs = [decode_base64(s, state.settings.max_body_bytes) for s in req.images]
    else:
        req = _parse_json(body, PredictJSON)
        if req.pixels is not None:
            return _pixel_array(req.pixels, state, "pixels", 2)[None, None]
        blobs = [decode_base64(req.image, state.settings.max_body_bytes)]
    return await _preprocess_all(blobs, state)


def _result(out: dict[str, np.ndarray], i: int, image: np.ndarray, state: AppState, extras: set[str]) -> dict[str, Any]:
    card = state.card
    lengths = out["lengths"][i]
    r: dict[str, Any] = {
        "prediction": int(lengths.argmax()),
        "lengths": rounded(lengths),
        "poses": rounded(out["poses"][i]),
        "reconstruction": picture(out["reconstruction"][i, 0]),
        "input": picture(image[0]),
        "model": {"name": card.name, "version": card.version, "provider": state.engine.provider, "precision": state.engine.precision},
    }
    if extras:
        c = out["coupling"][i]  # [1152,10], i = channel*36 + row*6 + col
        g = card.primary_grid
        if "coupling" in extras:
            r["coupling"] = rounded(c)
        r["coupling_grid"] = rounded(c.reshape(card.primary_channels, g, g, card.num_classes).mean(0).transpose(2, 0, 1))
    return r


EXTRAS = {"coupling", "coupling_grid"}


def _extras(include: str | None) -> set[str]:
    parts = {p.strip() for p in (include or "").split(",") if p.strip()}
    unknown = parts - EXTRAS
    if unknown:
        raise Invalid(f"include: unknown value(s) {sorted(unknown)}; choose from {sorted(EXTRAS)}")
    return parts


INCLUDE_DOC = ("comma-separated extras: `coupling` adds the routing coefficients [1152][10] and their 6x6 map per digit "
               "`coupling_grid` [10][6][6]; `coupling_grid` adds only the map")
# Read from the query string by hand and documented here: FastAPI's per-request validation of this one optional
# parameter was 4% of the event loop's time per /predict under load.
INCLUDE_PARAM = {"name": "include", "in": "query", "required": False, "description": INCLUDE_DOC,
                 "schema": {"anyOf": [{"type": "string"}, {"type": "null"}], "title": "Include"}, "example": "coupling"}


def _with_include(spec: dict) -> dict:
    return {**spec, "parameters": [INCLUDE_PARAM]}


@router.post("/predict", response_model=Prediction, responses=ERRORS, openapi_extra=_with_include(_body_spec(PredictJSON, multiple=False)),
             summary="Classify one digit: capsule lengths, poses, reconstruction")
async def predict(request: Request, state: AppState = Depends(ready_state)) -> FastJSON:
    """Send an image as multipart field `file`, as JSON `{"image": base64}`, or MNIST-like `{"pixels": 28x28}`.

    Images are made to look like MNIST first (ink bright on black, fit to 20x20, centred by mass);
    `pixels` go to the network as they are."""
    extras = _extras(request.query_params.get("include"))
    with state.batcher.in_flight():
        images = await _images(request, state, batch=False)
        out = await state.batcher.submit(images, state.settings.request_timeout_s)
        return FastJSON(_result(out, 0, images[0], state, extras))  # ~0.1 ms: cheaper than a thread hop


@router.post("/predict/batch", response_model=BatchPrediction, responses=ERRORS, openapi_extra=_with_include(_body_spec(PredictBatchJSON, multiple=True)),
             summary="Classify several digits in one request")
async def predict_batch(request: Request, state: AppState = Depends(ready_state)) -> FastJSON:
    """Several `file` parts, `{"images": [...]}` or `{"pixels": [N x 28 x 28]}`, up to the configured maximum (64)."""
    extras = _extras(request.query_params.get("include"))
    with state.batcher.in_flight():
        images = await _images(request, state, batch=True)
        out = await state.batcher.submit(images, state.settings.request_timeout_s)
        results = await to_thread.run_sync(lambda: [_result(out, i, images[i], state, extras) for i in range(len(images))])
        return FastJSON({"results": results})
