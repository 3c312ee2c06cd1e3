"""GET /dimensions: what each digit capsule's 16 pose dimensions do to the decoder's image, as measured offline.

The atlas is written by `python -m model.atlas` next to the weights (weights/dimensions.json); it is read once, and
only served for the model version it was measured on: a stale atlas would put false names on the sliders.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi import APIRouter
from fastapi.responses import Response

from service.deps import ReadyDep
from service.errors import ClientError
from service.postprocess import FastJSON
from service.schemas import ErrorBody
from service.state import AppState

log = logging.getLogger("capsnet.dimensions")
router = APIRouter(tags=["decoder"])
FILE = "dimensions.json"


class NoAtlas(ClientError):
    status, code = 404, "not_found"


def load_atlas(state: AppState) -> dict[str, Any] | None:
    path = state.settings.weights_dir / FILE
    try:
        atlas = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        log.error("%s unreadable: %s", path, e)
        return None
    if atlas.get("model_version") != state.card.version:
        log.warning("%s was measured on model %s, this is %s: not served", path, atlas.get("model_version"), state.card.version)
        return None
    return atlas


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
