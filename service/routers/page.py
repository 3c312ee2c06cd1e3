"""GET /: the draw-and-perturb page, rendered from templates/ with the model card's sizes."""
from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

from service.state import StateDep

router = APIRouter(tags=["page"])


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
async def index(request: Request, state: StateDep) -> HTMLResponse:
    templates: Jinja2Templates = request.app.state.templates
    card = state.engine.card if state.engine else None
    ctx = {
        "model_name": card.name if card else "capsnet",
        "model_version": card.version if card else "",
        "provider": state.engine.provider if state.engine else "loading",
        "device": state.engine.device if state.engine else "",
        "num_classes": card.num_classes if card else 10,
        "digit_dim": card.digit_dim if card else 16,
        "image_size": card.image_size if card else 28,
        "primary_grid": card.primary_grid if card else 6,
        "primary_channels": card.primary_channels if card else 32,
    }
    return templates.TemplateResponse(request, "index.html", ctx)
