"""GET /dimensions: what each digit capsule's 16 pose dimensions do to the decoder's image, as measured offline.

The atlas is written by `python -m model.atlas` next to the weights (weights/dimensions.json); it is read with each
version of the weights (service/loading.py), and only served for the model version it was measured on: a stale atlas
would put false names on the sliders.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from service.deps import ReadyDep
from service.errors import ClientError
from service.postprocess import FastJSON
from service.schemas import ErrorBody

router = APIRouter(tags=["decoder"])


class NoAtlas(ClientError):
    status, code = 404, "not_found"


@router.get(
    "/dimensions",
    summary="What each pose dimension does, measured (the dimension atlas)",
    responses={404: {"model": ErrorBody, "description": "no atlas for the model being served"}},
)
async def dimensions(state: ReadyDep) -> Response:
    """For every digit capsule and pose dimension: the label (`ink`, `thickness`, `width`, `height`, `slant`, `x`,
    `y`, or `local` when no global measure dominates), its direction, the effect per +0.1 in the measure's units and
    in standard deviations, the effects on every measure, and how consistent and monotonic the sweep was."""
    if state.atlas is None:
        raise NoAtlas(f"no dimension atlas for model {state.card.version}: run `python -m model.atlas`")
    return FastJSON(state.atlas)
