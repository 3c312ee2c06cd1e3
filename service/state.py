"""The app's state, in one place: what the lifespan builds and the routes use (through service.deps)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from copy import copy
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from service.atlas import Atlas
from service.engine.batcher import Batcher
from service.engine.card import ModelCard
from service.engine.decoder_files import DecoderFile
from service.engine.protocol import InferenceEngine
from service.engine.routing_inspector import RoutingInspector
from service.engine.stats import ModelStats
from service.engine.two_digit import DECODER_NAME, NAME, PairEngine
from service.group import ProcessGroup
from service.inputs.mnist_test_set import TestDigits
from service.metrics import Metrics
from service.payload_log import PayloadLog
from service.settings import Settings
from service.threads import BoundedPool
from service.tracing import Tracing

T = TypeVar("T")

OIP_MODELS = ("capsnet", "decoder", NAME, DECODER_NAME)  # the last two where the card has the two-digit network


@dataclass(frozen=True)
class Models:
    """What one version of the weights serves with, built whole and swapped whole (a reload: service/engine/reload.py),
    so that a request that began on one version ends on it."""

    engine: InferenceEngine  # engine.local's onnxruntime engine, or remote.RemoteEngine with CAPSNET_ENGINE_URL
    batcher: Batcher
    routing_inspector: RoutingInspector | None = None  # weights/routing.onnx, for ?include=routing
    pair_engine: PairEngine | None = None  # the MultiMNIST network, when the card has it and the models run here
    decoder_files: dict[str, DecoderFile] = field(default_factory=dict)  # the decoders the page may run itself, by model
    # each network's dimension atlas (weights/dimensions.json, multimnist-dimensions.json), by model name, where it was
    # measured on the version served (routers/dimensions.py)
    atlases: dict[str, Atlas] = field(default_factory=dict)


class _OfModels(Generic[T]):
    """An AppState attribute read from the version of the weights serving (AppState.models): `empty` until one is."""

    def __init__(self, empty: T) -> None:
        self.empty = empty

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, state: AppState | None, owner: type | None = None) -> T:
        models = state.models if state is not None else None
        return getattr(models, self.name) if models is not None else self.empty


@dataclass
class AppState:
    settings: Settings
    metrics: Metrics
    models: Models | None = None  # None until loaded; replaced whole by a reload
    bounded_pool: BoundedPool | None = None
    test_digits: TestDigits | None = None  # MNIST's test set where the server has it: the page's random pairs
    ready: bool = False
    unloaded: frozenset[str] = frozenset()  # models taken out of service by the repository extension's unload
    reloading: asyncio.Lock = field(default_factory=asyncio.Lock)  # one reload at a time (service/loading.py)
    background: set[asyncio.Task] = field(default_factory=set)  # SIGHUP's reloads, and old versions draining after one
    api_keys: tuple[bytes, ...] = ()  # CAPSNET_API_KEYS_FILE's keys; none: no key asked (service/http/auth.py)
    failed: str | None = None  # why loading the models failed (the process then stops: service/app.py)
    stop: Callable[[], None] | None = None  # how to stop the process it serves in (`python -m service` sets it)
    # what to do when a drain begins, before HTTP stops taking connections (service/processes.py): gRPC's health says so
    on_drain: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    payload_log: PayloadLog | None = None  # a sample of inputs and outputs as JSON lines, when CAPSNET_PAYLOAD_LOG asks
    group: ProcessGroup | None = None  # the worker processes this one serves beside (service/processes.py); None: alone
    tracing: Tracing | None = None  # OpenTelemetry, when the OTEL_* variables turn it on (service/tracing.py)
    # the Open Inference Protocol's statistics, counted from what /v2 served (service/routers/oip.py)
    oip_stats: dict[str, ModelStats] = field(default_factory=lambda: {name: ModelStats() for name in OIP_MODELS})

    def pinned(self) -> AppState:
        """This state with today's models held for one request: a reload that lands meanwhile swaps them for the requests
        after it, and this one's answer comes whole from the version it began on."""
        return copy(self)

    # the serving version's parts, by the names the routes use (each read through `models`, whole)
    engine = _OfModels[InferenceEngine | None](None)
    batcher = _OfModels[Batcher | None](None)
    routing_inspector = _OfModels[RoutingInspector | None](None)
    pair_engine = _OfModels[PairEngine | None](None)
    decoder_files = _OfModels[dict[str, DecoderFile]]({})
    atlases = _OfModels[dict[str, Atlas]]({})

    @property
    def card(self) -> ModelCard:
        assert self.models is not None
        return self.models.engine.card
