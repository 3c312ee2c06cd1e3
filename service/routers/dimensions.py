"""GET /dimensions: what each digit capsule's 16 pose dimensions do to the decoder's image, as measured offline, for
the MNIST network or (`?model=multimnist`) the two-digit one.

Each atlas is written by `python -m model.atlas` next to the weights (weights/dimensions.json,
weights/multimnist-dimensions.json); it is read with each version of the weights (service/atlas.py), and only served
for the model version it was measured on: a stale atlas would put false names on the sliders.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from service.deps import ReadyDep, TwoDigit, model_param
from service.engine.two_digit import NAME as PAIRS
from service.errors import ClientError
from service.schemas import ERRORS, ErrorBody

router = APIRouter(tags=["decoder"])


MODEL_PARAM = model_param(f"`capsnet` (the default) or `{PAIRS}`: whose digit capsules the atlas describes")


class NoAtlas(ClientError):
    status, code = 404, "not_found"


@router.get(
    "/dimensions",
    summary="What each pose dimension does, measured (the dimension atlas)",
    responses={
        404: {"model": ErrorBody, "description": "no atlas for the model being served, or that model not served here"},
        422: {"model": ErrorBody, "description": "a model this service does not know"},
        503: ERRORS[503],
    },
    openapi_extra={"parameters": [MODEL_PARAM]},
)
async def dimensions(request: Request, state: ReadyDep, pairs: TwoDigit) -> Response:
    """For every digit capsule and pose dimension: the label (`ink`, `thickness`, `width`, `height`, `slant`, `x`,
    `y`, or `local` when no global measure dominates), its direction, the effect per +0.1 in the measure's units and
    in standard deviations, the effects on every measure, and how consistent and monotonic the sweep was.
    `?model=multimnist`: the two-digit network's. Gzipped for a client that accepts it."""
    name, version, command = ("capsnet", state.card.version, "python -m model.atlas")
    if pairs is not None:
        name, version, command = (PAIRS, pairs.card.version, f"python -m model.atlas --network {PAIRS}")
    atlas = state.atlases.get(name)
    if atlas is None:
        raise NoAtlas(f"no dimension atlas for model {name} {version}: run `{command}`")
    if "gzip" in request.headers.get("accept-encoding", ""):  # as Starlette's GZipMiddleware decides
        return Response(atlas.gzipped, media_type="application/json", headers={"Content-Encoding": "gzip", "Vary": "Accept-Encoding"})
    return Response(atlas.json, media_type="application/json", headers={"Vary": "Accept-Encoding"})
