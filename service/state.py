"""The app's state, in one place: what the lifespan builds and the routes use (through service.deps)."""

from __future__ import annotations

from collections.abc import Callable
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


@dataclass
class AppState:
    settings: Settings
    metrics: Metrics
    engine: InferenceEngine | None = None  # engine.Engine, or remote.RemoteEngine with CAPSNET_ENGINE_URL
    batcher: Batcher | None = None
    decode_pool: DecodePool | None = None
    routing_inspector: RoutingInspector | None = None  # weights/routing.onnx, for ?include=routing (service/engine/routing_inspector.py)
    # the MultiMNIST network, when the card has it and the models run here (service/engine/two_digit.py)
    pair_engine: PairEngine | None = None
    test_digits: TestDigits | None = None  # MNIST's test set where the server has it: the page's random pairs
    decoder_files: dict[str, DecoderFile] = field(default_factory=dict)  # the decoders the page may run itself, by model
    atlas: dict | None = None  # weights/dimensions.json when it was measured on this model (routers/dimensions.py)
    ready: bool = False
    api_keys: tuple[bytes, ...] = ()  # CAPSNET_API_KEYS_FILE's keys; none: no key asked (service/http/auth.py)
    failed: str | None = None  # why loading the models failed (the process then stops: service/app.py)
    stop: Callable[[], None] | None = None  # how to stop the process it serves in (`python -m service` sets it)
    payload_log: PayloadLog | None = None  # a sample of inputs and outputs as JSON lines, when CAPSNET_PAYLOAD_LOG asks
    tracing: Tracing | None = None  # OpenTelemetry, when the OTEL_* variables turn it on (service/tracing.py)
    # the Open Inference Protocol's statistics, counted from what /v2 served (service/routers/oip.py)
    oip_stats: dict[str, ModelStats] = field(default_factory=lambda: {name: ModelStats() for name in OIP_MODELS})

    @property
    def card(self) -> ModelCard:
        assert self.engine is not None
        return self.engine.card
