"""What the lifespan builds and the routes use, reached through FastAPI dependencies."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from service.batcher import Batcher
from service.card import ModelCard
from service.errors import ClientError
from service.inference import InferenceEngine
from service.metrics import Metrics
from service.pairs import PairEngine, TestDigits
from service.routing import Tracer
from service.settings import Settings
from service.uploads import DecodePool


class NotReady(ClientError):
    status, code = 503, "not_ready"


@dataclass
class AppState:
    settings: Settings
    metrics: Metrics
    engine: InferenceEngine | None = None  # engine.Engine, or remote.RemoteEngine with CAPSNET_ENGINE_URL
    batcher: Batcher | None = None
    decode_pool: DecodePool | None = None
    routing: Tracer | None = None  # weights/routing.onnx, for ?include=routing (service/routing.py)
    pairs: PairEngine | None = None  # the MultiMNIST network, when the card has it and the models run here (service/pairs.py)
    test_digits: TestDigits | None = None  # MNIST's test set where the server has it: the page's random pairs
    atlas: dict | None = None  # weights/dimensions.json when it was measured on this model (routers/dimensions.py)
    ready: bool = False

    @property
    def card(self) -> ModelCard:
        assert self.engine is not None
        return self.engine.card


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
