"""Every FastAPI dependency of the routes, in one place: the app's state (ready or not), the checked request body, and
the two-digit network a request's `?model=` names."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from service.engine.two_digit import NAME, PairEngine
from service.errors import Invalid, NotReady, NotServed
from service.http.body import Body, ReadRequest
from service.state import AppState


# Both dependencies are `async def` on purpose: FastAPI runs a plain `def` dependency in its thread
# pool, and that hop (a queue put, a thread wake-up, a GIL hand-off) cost a quarter of the event
# loop's time per /predict under 16 clients.
async def get_state(request: Request) -> AppState:
    return request.app.state.capsnet


async def ready_state(request: Request) -> AppState:
    """For routes that need the model: 503 until the sessions are loaded and warm."""
    state: AppState = request.app.state.capsnet
    if not state.ready or state.engine is None:
        raise NotReady("model is loading; retry shortly")
    return state


StateDep = Annotated[AppState, Depends(get_state)]
ReadyDep = Annotated[AppState, Depends(ready_state)]


async def _checked_body(request: Request) -> Body:
    assert isinstance(request, ReadRequest), "a route that takes Upload must be a BodyRoute"
    return request.checked


Upload = Annotated[Body, Depends(_checked_body)]


def pair_engine(request: Request, state: AppState) -> PairEngine | None:
    """The two-digit network when `?model=multimnist` asks for it (None: the MNIST one); 404 when it is not served here."""
    which = request.query_params.get("model")
    if which in (None, "capsnet"):
        return None
    if which != NAME:
        raise Invalid(f"model: {which!r} is not a model of this service; choose capsnet or {NAME}")
    if state.pairs is None:
        why = "the model card has no multimnist entry" if state.card.multimnist is None else "the models run on a remote engine"
        raise NotServed(f"model {NAME} is not served here ({why})")
    return state.pairs
