"""The app's state, in one place: what the lifespan builds and the routes use (through service.deps)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from copy import copy
from dataclasses import dataclass, field

from service.engine.batcher import Batcher
from service.engine.card import ModelCard
from service.engine.decoder_files import DecoderFile
from service.engine.protocol import InferenceEngine
from service.engine.routing_inspector import RoutingInspector
from service.engine.stats import ModelStats
from service.engine.two_digit import DECODER_NAME, NAME, PairEngine
from service.inputs.mnist_test_set import TestDigits
from service.inputs.uploads import DecodePool
from service.metrics import Metrics
from service.payload_log import PayloadLog
from service.settings import Settings
from service.tracing import Tracing

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
    atlas: dict | None = None  # weights/dimensions.json when it was measured on this model (routers/dimensions.py)


@dataclass
class AppState:
    settings: Settings
    metrics: Metrics
    models: Models | None = None  # None until loaded; replaced whole by a reload
    decode_pool: DecodePool | None = None
    test_digits: TestDigits | None = None  # MNIST's test set where the server has it: the page's random pairs
    ready: bool = False
    unloaded: frozenset[str] = frozenset()  # models taken out of service by the repository extension's unload
    reloading: asyncio.Lock = field(default_factory=asyncio.Lock)  # one reload at a time (service/loading.py)
    retiring: set[asyncio.Task] = field(default_factory=set)  # old versions draining after a reload, and SIGHUP's reloads
    api_keys: tuple[bytes, ...] = ()  # CAPSNET_API_KEYS_FILE's keys; none: no key asked (service/http/auth.py)
    failed: str | None = None  # why loading the models failed (the process then stops: service/app.py)
    stop: Callable[[], None] | None = None  # how to stop the process it serves in (`python -m service` sets it)
    payload_log: PayloadLog | None = None  # a sample of inputs and outputs as JSON lines, when CAPSNET_PAYLOAD_LOG asks
    tracing: Tracing | None = None  # OpenTelemetry, when the OTEL_* variables turn it on (service/tracing.py)
    # the Open Inference Protocol's statistics, counted from what /v2 served (service/routers/oip.py)
    oip_stats: dict[str, ModelStats] = field(default_factory=lambda: {name: ModelStats() for name in OIP_MODELS})

    def pinned(self) -> AppState:
        """This state with today's models held for one request: a reload that lands meanwhile swaps them for the requests
        after it, and this one's answer comes whole from the version it began on."""
        return copy(self)

    # the current version's parts, by the names the routes use
    @property
    def engine(self) -> InferenceEngine | None:
        return self.models.engine if self.models else None

    @property
    def batcher(self) -> Batcher | None:
        return self.models.batcher if self.models else None

    @property
    def routing_inspector(self) -> RoutingInspector | None:
        return self.models.routing_inspector if self.models else None

    @property
    def pair_engine(self) -> PairEngine | None:
        return self.models.pair_engine if self.models else None

    @property
    def decoder_files(self) -> dict[str, DecoderFile]:
        return self.models.decoder_files if self.models else {}

    @property
    def atlas(self) -> dict | None:
        return self.models.atlas if self.models else None

    @property
    def card(self) -> ModelCard:
        assert self.models is not None
        return self.models.engine.card
