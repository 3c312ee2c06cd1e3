"""Every FastAPI dependency of the routes, in one place: the app's state (ready or not), the checked request body, and
the query parameters, parsed from their types.

The query parameters are hidden from FastAPI's generated schema: each route documents them in its `openapi_extra`, in the
form clients already generate code from (tests/service/routers/openapi.json)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from fastapi import Depends, Query, Request
from pydantic import BeforeValidator

from service.engine.two_digit import NAME, PairEngine
from service.errors import Invalid, NotReady, NotServed
from service.http.body import Body, ReadRequest
from service.postprocess import EXTRAS, PIXELS, included
from service.state import AppState


# The dependencies are `async def` on purpose: FastAPI runs a plain `def` dependency in its thread
# pool, and that hop (a queue put, a thread wake-up, a GIL hand-off) cost a quarter of the event
# loop's time per /predict under 16 clients.
async def get_state(request: Request) -> AppState:
    """The state with the version of the weights serving now, held for this request (a reload may land meanwhile)."""
    return request.app.state.capsnet.pinned()


async def ready_state(request: Request) -> AppState:
    """For routes that need the model: 503 until the sessions are loaded and warm, and while `capsnet` is unloaded."""
    state: AppState = request.app.state.capsnet.pinned()
    if not state.ready or state.engine is None:
        raise NotReady("model is loading; retry shortly", {"Retry-After": "1"})
    if "capsnet" in state.unloaded:
        raise NotReady("model capsnet is unloaded; POST /v2/repository/models/capsnet/load serves it again", {"Retry-After": "5"})
    return state


async def serving_state(request: Request) -> AppState:
    """The state itself, for what changes it: the model repository's load and unload."""
    return request.app.state.capsnet


StateDep = Annotated[AppState, Depends(get_state)]
ReadyDep = Annotated[AppState, Depends(ready_state)]
ServingDep = Annotated[AppState, Depends(serving_state)]


async def _checked_body(request: Request) -> Body:
    assert isinstance(request, ReadRequest), "a route that takes Upload (or PredictArgs, BatchArgs) must be a BodyRoute"
    return request.checked


Upload = Annotated[Body, Depends(_checked_body)]

# a list: `?include=a&include=b` (what HTTP clients send for a list of values) counts as `?include=a,b`, not as its last
IncludeQuery = Annotated[list[str] | None, Query(alias="include", include_in_schema=False)]


async def _pixels(include: IncludeQuery = None) -> bool:
    """?include= on a route whose only extra is `pixels` (/probe, /reconstruct)."""
    return PIXELS in included(include, {PIXELS})


WithPixels = Annotated[bool, Depends(_pixels)]


def _type_or_mean(value: object) -> int | None:
    """?routing_type=: `mean` (None) or a whole number; its range is the card's (service.engine.routing_inspector)."""
    if value is None or value == "mean":
        return None
    try:
        return int(str(value))
    except ValueError:
        raise ValueError(f"routing_type must be `mean` or a capsule type, got {value!r}") from None


RoutingType = Annotated[int | None, BeforeValidator(_type_or_mean), Query(alias="routing_type", include_in_schema=False)]


ModelQuery = Annotated[Literal["capsnet", NAME], Query(alias="model", include_in_schema=False)]


def model_param(description: str) -> dict:
    """`?model=` as OpenAPI documents it (ModelQuery itself is kept out of the schema): each route says what it means there."""
    return {
        "name": "model",
        "in": "query",
        "required": False,
        "description": description,
        "schema": {"enum": ["capsnet", NAME], "default": "capsnet", "title": "Model"},
    }


def _pairs(state: AppState, model: str) -> PairEngine | None:
    """The two-digit network when `?model=multimnist` asks for it (None: the MNIST one); 404 when it is not served here."""
    if model == "capsnet":
        return None
    if state.pair_engine is None:
        why = "the model card has no multimnist entry" if state.card.multimnist is None else "the models run on a remote engine"
        raise NotServed(f"model {NAME} is not served here ({why})")
    return state.pair_engine


async def _two_digit(state: ReadyDep, model: ModelQuery = "capsnet") -> PairEngine | None:
    return _pairs(state, model)


TwoDigit = Annotated[PairEngine | None, Depends(_two_digit)]


@dataclass(frozen=True, slots=True)
class PredictCall:
    """What /predict and /predict/batch take, from one dependency: the checked body, the ready state and the query.
    Each dependency FastAPI solves costs the event loop time on every request, the hottest route's most of all (the body
    and the query solved apart cost about 20 us of the loop a /predict more). The state stays a dependency of its own:
    FastAPI solves it before it looks at the query, so a request to a service still loading is a 503 whatever its query,
    as on every route that needs the model."""

    body: Body
    state: AppState
    extras: set[str]  # ?include=: what the one-digit network's answers add
    routing_type: int | None  # ?routing_type=, with include=routing
    pairs: PairEngine | None  # ?model=multimnist (/predict only)


async def _predict_call(
    request: Request, state: ReadyDep, include: IncludeQuery = None, routing_type: RoutingType = None, model: ModelQuery = "capsnet"
) -> PredictCall:
    return PredictCall(await _checked_body(request), state, included(include, EXTRAS), routing_type, _pairs(state, model))


def one_digit_only(model: str, route: str) -> None:
    """A route of the MNIST network alone refuses `?model=multimnist` rather than answering for the other network."""
    if model != "capsnet":
        raise Invalid(f"model={model} is not served on {route}: it reads one picture a request, at /predict?model={model}")


async def _batch_call(
    request: Request, state: ReadyDep, include: IncludeQuery = None, routing_type: RoutingType = None, model: ModelQuery = "capsnet"
) -> PredictCall:
    one_digit_only(model, "/predict/batch")
    return PredictCall(await _checked_body(request), state, included(include, EXTRAS), routing_type, None)


async def _probe_model(model: ModelQuery = "capsnet") -> None:
    one_digit_only(model, "/probe")


ProbeModel = Annotated[None, Depends(_probe_model)]


PredictArgs = Annotated[PredictCall, Depends(_predict_call)]
BatchArgs = Annotated[PredictCall, Depends(_batch_call)]


def capsnet_only(extras: set[str], routing_type: int | None) -> None:
    """The two-digit network's answers add only `pixels`, and have no routing trace."""
    if routing_type is not None:
        raise Invalid(f"routing_type is for model=capsnet, not {NAME}")
    if other := sorted(extras - {PIXELS}):
        raise Invalid(f"include: {other} are for model=capsnet; {NAME} adds only {PIXELS}")
