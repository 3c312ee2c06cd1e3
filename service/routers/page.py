"""GET /: the draw-and-perturb page, rendered from templates/ with the model card's sizes."""

from __future__ import annotations

import json

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

from service.atlas import Atlas
from service.deps import ReadyDep
from service.engine.decoder_files import DecoderFile
from service.engine.two_digit import NAME
from service.inputs.preprocess import SIDE_GAP, SIDE_MASS, SIDE_SHIFT, SIDE_SPAN, WORK_SIDE
from service.state import AppState

router = APIRouter(tags=["page"])


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
async def index(request: Request, state: ReadyDep) -> HTMLResponse:
    """The sizes come from the model card: the page draws as many bars, sliders and grid cells as the model has. (uvicorn
    serves nothing before the lifespan has loaded the model, so the card is always there.)"""
    templates: Jinja2Templates = request.app.state.templates
    card, engine = state.card, state.engine
    ctx = {
        "model_name": card.name,
        "model_version": card.version,
        "provider": engine.provider,
        "device": engine.device,
        "num_classes": card.num_classes,
        "digit_dim": card.digit_dim,
        "image_size": card.image_size,
        "primary_grid": card.primary_grid,
        "primary_stride": card.architecture.primary_stride,
        "primary_channels": card.primary_channels,
        # the routing inspector's trace (weights/routing.onnx): a front of a remote engine may be without it
        "routing": state.routing_inspector is not None,
        # section 7, two digits at once: when the two-digit network is served here
        "pairs": state.pair_engine is not None,
        "pair_size": state.pair_engine.card.image_size if state.pair_engine is not None else None,
        "pair_box": state.pair_engine.card.input.pair_box if state.pair_engine is not None else None,
        # two digits written apart, laid over each other: the page frames each ink as the server does (preprocess.fit_pair)
        "pair_digit_box": state.pair_engine.card.input.mnist_digit_box if state.pair_engine is not None else None,
        "side_gap": SIDE_GAP,
        "side_mass": SIDE_MASS,
        "side_span": SIDE_SPAN,
        "side_shift": SIDE_SHIFT,
        "pair_score": state.pair_engine.card.test if state.pair_engine is not None and state.pair_engine.card.test is not None else None,
        # the same test pairs as the service reads them (its pair choice), beside the paper's measure, the two longest
        "pair_read": _pair_read(state),
        # an upload over these is shrunk in the browser to the longer side the service decodes a photo at (images.decode)
        "max_image_pixels": state.settings.max_image_pixels,
        "max_body_bytes": state.settings.max_body_bytes,
        "upload_side": 2 * WORK_SIDE,
        "needs_key": bool(state.api_keys),  # the page asks for an API key only where the server wants one
        "pair_sample": state.pair_engine is not None and state.test_digits is not None and state.test_digits.available(),
        # where the page's own decoder fetches each network's decoder file (none: the sliders draw on the server)
        "decoder": _spec(state.decoder_files.get("capsnet")),
        "pair_decoder": _spec(state.decoder_files.get(NAME)),
        # how many test digits (in pairs, for the two-digit network) each slider's name was measured on; none: no atlas
        "atlas_poses": _poses(state.atlases.get("capsnet")),
        "pair_atlas_poses": _poses(state.atlases.get(NAME)),
    }
    return templates.TemplateResponse(request, "index.html", ctx)


def _poses(atlas: Atlas | None) -> int | None:
    return atlas.document["rule"]["poses_per_digit"] if atlas is not None else None


def _spec(f: DecoderFile | None) -> str:
    return json.dumps(f.page_spec(), separators=(",", ":")) if f is not None else ""


def _pair_read(state: AppState) -> float | None:
    """The share of the fixed test pairs whose both digits the served reading names (the card's pair choice), if any."""
    choice = state.pair_engine.card.pair_choice if state.pair_engine is not None else None
    figures = choice.test_pairs if choice is not None else None
    return float(figures["read_right"]) if figures and "read_right" in figures else None
