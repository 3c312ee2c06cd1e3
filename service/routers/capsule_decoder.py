"""POST /reconstruct and /perturb: the decoder alone, driven by a pose the client chooses.

This is what the page's sliders call while dragged, so it skips the batcher: the decoder is ~1.4M
multiply-adds (1.9M for the two-digit network's), and a queue hop would cost more than the call.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from anyio import CapacityLimiter
from fastapi import APIRouter
from fastapi.responses import FileResponse

from service.deps import ReadyDep, TwoDigit, WithPixels, model_param
from service.engine.two_digit import PairEngine
from service.errors import Invalid, NotServed
from service.http.body import BodyRoute
from service.inputs.images import encode_png, tile_grid
from service.postprocess import PIXELS_PARAM, FastJSON, picture
from service.schemas import ERRORS, ErrorBody, Perturbation, PerturbRequest, Reconstruction, ReconstructRequest
from service.state import AppState
from service.threads import in_thread

router = APIRouter(tags=["decoder"], route_class=BodyRoute)

# named by its content: a browser may keep it as long as it likes, and a new export has another name
IMMUTABLE = {"Cache-Control": "public, max-age=31536000, immutable"}

MODEL_PARAM = model_param("`capsnet` (the default) or `multimnist`: whose decoder draws the pose (36x36 for multimnist)")
Decoder = Callable[[np.ndarray, np.ndarray], np.ndarray]

DEFAULT_DELTAS = [round(-0.25 + 0.05 * k, 2) for k in range(11)]  # the paper's Figure 4 range


def _pose(digit: int, pose: list[float], state: AppState) -> np.ndarray:
    card, limit = state.card, state.settings.max_abs_pose
    if digit >= card.num_classes:
        raise Invalid(f"digit: {digit} is not a capsule of this model (0-{card.num_classes - 1})")
    if len(pose) != card.digit_dim:
        raise Invalid(f"pose: {card.digit_dim} numbers expected, got {len(pose)}")
    arr = np.asarray(pose, dtype=np.float32)
    if np.abs(arr).max() > limit:
        raise Invalid(f"pose: values must lie within +-{limit:g}")
    return arr


def _decoder(pairs: PairEngine | None, state: AppState) -> tuple[Decoder, int, CapacityLimiter | None]:
    """The decoder `?model=` names, the side of what it draws, and the limiter its thread must hold: the two-digit
    network's, which bounds every call to that network whatever the route (MAX_AT_ONCE), or anyio's default."""
    if pairs is not None:
        return pairs.reconstruct, pairs.card.image_size, pairs.limiter
    return state.engine.reconstruct, state.card.image_size, None


@router.post(
    "/reconstruct",
    response_model=Reconstruction,
    responses={**ERRORS, 404: {"model": ErrorBody, "description": "?model= names a model not served here"}},
    openapi_extra={"parameters": [MODEL_PARAM, PIXELS_PARAM]},
    summary="Decode one digit capsule's pose into an image",
)
async def reconstruct(req: ReconstructRequest, state: ReadyDep, pairs: TwoDigit, with_pixels: WithPixels) -> FastJSON:
    """The decoder on `pose` placed in capsule `digit` (all other capsules zero), as in training."""
    decoder, _, limiter = _decoder(pairs, state)
    pose = _pose(req.digit, req.pose, state)
    img = await in_thread(decoder, np.array([req.digit], np.int64), pose[None], limiter=limiter)
    return FastJSON({"reconstruction": picture(img[0, 0], with_pixels)})


@router.post(
    "/perturb",
    response_model=Perturbation,
    responses={**ERRORS, 404: {"model": ErrorBody, "description": "?model= names a model not served here"}},
    openapi_extra={"parameters": [MODEL_PARAM]},
    summary="The paper's Figure 4 for one pose",
)
async def perturb(req: PerturbRequest, state: ReadyDep, pairs: TwoDigit) -> FastJSON:
    """Each of the 16 dimensions in turn shifted by each delta: one row per dimension, one column per delta."""
    decoder, side, limiter = _decoder(pairs, state)
    pose = _pose(req.digit, req.pose, state)
    deltas = DEFAULT_DELTAS if req.deltas is None else req.deltas
    limit = state.settings.max_deltas
    if not 1 <= len(deltas) <= limit:
        raise Invalid(f"deltas: between 1 and {limit} values, got {len(deltas)}")
    d = np.asarray(deltas, dtype=np.float32)
    if np.abs(d).max() > state.settings.max_abs_pose:
        raise Invalid(f"deltas: values must lie within +-{state.settings.max_abs_pose:g}")
    dim = state.card.digit_dim
    poses = np.repeat(pose[None, None], dim, 0).repeat(len(d), 1)  # [16,D,16]
    poses[np.arange(dim), :, np.arange(dim)] += d  # row k: dimension k shifted by each delta
    digits = np.full(dim * len(d), req.digit, np.int64)

    def run() -> str:
        imgs = decoder(digits, poses.reshape(-1, dim))  # [16*D,1,S,S]
        s = imgs.shape[-1]
        return encode_png(tile_grid(imgs.reshape(dim, len(d), s, s)))

    png = await in_thread(run, limiter=limiter)
    return FastJSON(
        {
            "digit": req.digit,
            "deltas": [float(x) for x in deltas],
            "grid": {"png": png, "rows": dim, "cols": len(d), "tile": side},
        }
    )


@router.get(
    "/decoders/{sha256}.onnx",
    response_class=FileResponse,
    responses={
        200: {"content": {"application/octet-stream": {}}, "description": "the ONNX file, cacheable for good (its name is its content)"},
        404: {"model": ErrorBody, "description": "no decoder file of this server has that sha256"},
        503: ERRORS[503],
    },
    summary="A decoder's committed ONNX file by the sha256 the model card gives it",
)
async def decoder_file(sha256: str, state: ReadyDep) -> FileResponse:
    """A decoder's committed ONNX file, by its sha256, for the page's own decoder (static/capsule_decoder.js)."""
    for f in state.decoder_files.values():
        if f.sha256 == sha256:
            return FileResponse(f.path, media_type="application/octet-stream", headers=IMMUTABLE)
    raise NotServed(f"no decoder file of this server has sha256 {sha256[:64]}")
