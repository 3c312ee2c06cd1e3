"""The models run on another Open Inference Protocol (v2) server: Triton, KServe, or a second instance of this service.

Why: the front (page, uploads, preprocessing, is_digit, the REST API) scales on CPU while the graphs run where the
GPU is. `RemoteEngine` is an `InferenceEngine` (service/engine/protocol.py) as the local `engine.Engine` is, so nothing
above it asks which one it has; its graphs' signatures are the engine's own metadata, checked against the card.

The stock `tritonclient.http` speaks the protocol with binary tensors. Its client is not thread safe (geventhttpclient
underneath), so each thread that calls the engine (the batcher's, anyio's for the decoder) holds its own client with
its own kept-alive connection: connections are reused, and never shared between threads. It is imported here only
when CAPSNET_ENGINE_URL is set, so a local service does not load it.

A refused connection, a timeout or a 5xx from the engine is `EngineUnavailable`: a 503 with Retry-After, not a 500;
the engine refusing a request (a 4xx) is a bug on this side and fails as any model error does (500).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from model import FP32_FILE
from service.engine.card import ModelCard
from service.engine.cores import REMOTE_WORKERS
from service.engine.outputs import EXTRA_OUTPUTS, explained, fetched
from service.engine.tensors import Signature, TensorSpec
from service.errors import EngineUnavailable
from service.threads import in_thread

log = logging.getLogger("capsnet.remote")

READY_CACHE_S = 1.0  # how long a health check of the engine stands: /readyz is polled, and must stay cheap


class EngineMismatch(ValueError):
    """The remote models are not the ones the local model card describes: start-up stops."""


def expected_signatures(card: ModelCard) -> dict[str, dict[str, dict[str, tuple[str, tuple[int, ...]]]]]:
    """What the card says each graph takes and gives: {model: {"inputs"|"outputs": {name: (datatype, shape)}}}; -1 the batch."""
    s, k, d, p = card.image_size, card.num_classes, card.digit_dim, card.num_primary
    image = ("FP32", (-1, 1, s, s))
    return {
        "capsnet": {
            "inputs": {"image": image},
            "outputs": {
                "lengths": ("FP32", (-1, k)),
                "poses": ("FP32", (-1, k, d)),
                "reconstruction": image,
                "coupling": ("FP32", (-1, p, k)),
                "primary": ("FP32", (-1, p, card.primary_dim)),
            },
        },
        "decoder": {"inputs": {"digit": ("INT64", (-1,)), "pose": ("FP32", (-1, d))}, "outputs": {"reconstruction": image}},
    }


def check_metadata(name: str, metadata: dict[str, Any], card: ModelCard) -> Signature:
    """The remote model's inputs and outputs against the card's sizes; a difference is an EngineMismatch naming it.
    The decoder's `digit` may be [-1, 1]: Triton serves the 1-D input as dims [1] with a reshape (deploy/triton)."""
    want = expected_signatures(card)[name]
    graph: dict[str, list[TensorSpec]] = {"inputs": [], "outputs": []}
    for side in ("inputs", "outputs"):
        got = {t["name"]: (t["datatype"], tuple(int(x) for x in t["shape"])) for t in metadata.get(side, [])}
        if set(got) != set(want[side]):
            raise EngineMismatch(f"remote model '{name}' has {side} {sorted(got)}, the model card's graph has {sorted(want[side])}")
        for tensor, (datatype, shape) in want[side].items():
            have = got[tensor]
            if name == "decoder" and tensor == "digit" and have == ("INT64", (-1, 1)):
                have = ("INT64", (-1,))
            if have != (datatype, shape):
                raise EngineMismatch(
                    f"remote model '{name}' {side[:-1]} '{tensor}' is {have[0]} {list(have[1])}, "
                    f"the model card says {datatype} {list(shape)} (another model, or another export?)"
                )
            graph[side].append(TensorSpec(tensor, datatype, shape))
    return tuple(graph["inputs"]), tuple(graph["outputs"])


@dataclass(eq=False)
class RemoteEngine:
    url: str  # as configured, e.g. http://triton:8000
    card: ModelCard
    timeout_s: float
    graphs: dict[str, Signature] = field(default_factory=dict)  # capsnet and decoder, from the engine's metadata
    server: dict[str, Any] = field(default_factory=dict)  # GET /v2 of the engine: name, version, extensions
    device: str = "remote"  # GPU or CPU when the engine's capsnet config says (instance_group kind)
    model_file: str = "remote"
    precision: str = "unknown"
    _local: threading.local = field(default_factory=threading.local)
    _ready_at: float = -1e9
    _ready: bool = False
    _ready_lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def provider(self) -> str:
        return "remote"

    @property
    def session_providers(self) -> list[str]:
        return ["remote"]

    @property
    def busy_session(self) -> bool:
        return False  # the engine does its own scheduling

    def signatures(self) -> dict[str, Signature]:
        return self.graphs

    async def check_ready(self) -> bool:
        return await in_thread(self.ready)  # the check blocks on the network

    def batch_workers(self, ms_per_image: float | None) -> int:
        return REMOTE_WORKERS

    @property
    def host(self) -> str:
        """host:port, as tritonclient takes it (no scheme)."""
        parts = urlsplit(self.url if "://" in self.url else f"http://{self.url}")
        if parts.scheme != "http":
            raise ValueError(f"CAPSNET_ENGINE_URL {self.url!r}: only http:// is supported")
        return parts.netloc

    def _client(self) -> Any:
        """This thread's client (one kept-alive connection), made on first use."""
        client = getattr(self._local, "client", None)
        if client is None:
            import tritonclient.http as triton  # lazily: a local service never loads it

            client = self._local.client = triton.InferenceServerClient(
                self.host, concurrency=1, connection_timeout=self.timeout_s, network_timeout=self.timeout_s
            )
        return client

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """fn(client, ...) with the engine's failures sorted: unreachable or 5xx -> EngineUnavailable, 4xx -> RuntimeError."""
        from tritonclient.utils import InferenceServerException

        try:
            return fn(self._client(), *args, **kwargs)
        except InferenceServerException as e:
            status = str(e.status() or "")
            if status.startswith("4") and status != "429":
                raise RuntimeError(f"the engine at {self.url} refused {what}: {e}") from e
            self._drop_client()
            raise EngineUnavailable(f"the engine at {self.url} failed {what}: {e}") from e
        except Exception as e:  # refused, reset, timed out: geventhttpclient raises socket and gevent errors
            self._drop_client()
            raise EngineUnavailable(f"the engine at {self.url} is unreachable ({what}): {type(e).__name__}: {e}") from e

    def _drop_client(self) -> None:
        """After a failure the connection may be half dead: the next call opens a fresh one."""
        client = getattr(self._local, "client", None)
        self._local.client = None
        if client is not None:
            with contextlib.suppress(Exception):  # closing a broken connection may fail too; it is dropped either way
                client.close()

    # ---- start-up ----

    def connect(self, start_timeout_s: float) -> None:
        """Wait for the engine to be ready (a log line each try; at most start_timeout_s, 0: forever), then read and check
        both models' metadata against the card. Raises EngineUnavailable when the time runs out, EngineMismatch on a
        different model."""
        deadline = time.monotonic() + start_timeout_s
        while not self.ready(cached=False):
            if start_timeout_s and time.monotonic() >= deadline:
                raise EngineUnavailable(f"the engine at {self.url} was not ready within {start_timeout_s:g} s")
            log.warning("waiting for the engine at %s to be ready", self.url)
            time.sleep(1.0)
        self.server = self._call("server metadata", lambda c: c.get_server_metadata())
        self.graphs = {
            name: check_metadata(name, self._call(f"{name} metadata", lambda c, name=name: c.get_model_metadata(name)), self.card)
            for name in ("capsnet", "decoder")
        }
        try:  # the configuration extension (Triton, this service; not every KServe runtime): where and what it runs
            config = self._call("capsnet config", lambda c: c.get_model_config("capsnet"))
        except (EngineUnavailable, RuntimeError) as e:
            log.info("the engine gives no model configuration (%s): device and precision unknown", e)
            config = {}
        kinds = {g.get("kind") for g in config.get("instance_group", [])}
        self.device = {frozenset({"KIND_GPU"}): "GPU", frozenset({"KIND_CPU"}): "CPU"}.get(frozenset(kinds), "remote")
        self.model_file = config.get("default_model_filename") or "remote"
        int8_file = self.card.int8.file if self.card.int8 else None
        self.precision = "int8" if self.model_file == int8_file else "fp32" if self.model_file == FP32_FILE else "unknown"
        log.info(
            "engine %s: %s %s, capsnet on %s (%s)",
            self.url,
            self.server.get("name"),
            self.server.get("version"),
            self.device,
            self.model_file,
        )

    def ready(self, cached: bool = True) -> bool:
        """The engine's /v2/health/ready, checked at most once a second (READY_CACHE_S) unless `cached` is False."""
        with self._ready_lock:
            if cached and time.monotonic() - self._ready_at < READY_CACHE_S:
                return self._ready
            try:
                self._ready = bool(self._call("health", lambda c: c.is_server_ready()))
            except (EngineUnavailable, RuntimeError):
                self._ready = False
            self._ready_at = time.monotonic()
            return self._ready

    def describe(self) -> dict[str, Any]:
        """What /model says of the engine; /readyz names its url."""
        return {"kind": "remote", "url": self.url, "server": self.server}

    # ---- inference: called from the batcher's threads and anyio's, so blocking here is fine ----

    def _infer(self, model: str, inputs: list[tuple[str, str, np.ndarray]], outputs: list[str]) -> dict[str, np.ndarray]:
        import tritonclient.http as triton

        tensors = [
            triton.InferInput(name, list(arr.shape), datatype).set_data_from_numpy(arr, binary_data=True) for name, datatype, arr in inputs
        ]
        wanted = [triton.InferRequestedOutput(name, binary_data=True) for name in outputs]
        result = self._call(f"{model} inference", lambda c: c.infer(model, tensors, outputs=wanted))
        return {name: result.as_numpy(name) for name in outputs}

    def predict(
        self, images: np.ndarray, busy: bool = False, explain: np.ndarray | None = None, fetch: frozenset[str] = EXTRA_OUTPUTS
    ) -> dict[str, np.ndarray]:
        """As Engine.predict: capsnet on the engine (only the outputs wanted travel), then the counterfactuals on its
        decoder. `busy` means nothing here."""
        out = self._infer("capsnet", [("image", "FP32", np.ascontiguousarray(images, np.float32))], fetched(fetch))
        return explained(self.reconstruct, out, images, explain)

    def reconstruct(self, digits: np.ndarray, poses: np.ndarray) -> np.ndarray:
        """digits int64 [N], poses float32 [N,16] -> [N,1,S,S]. `digit` goes as [N,1], which both Triton (dims [1], reshaped)
        and this service (which also takes [N]) accept."""
        digit = np.ascontiguousarray(digits, np.int64).reshape(-1, 1)
        return self._infer(
            "decoder", [("digit", "INT64", digit), ("pose", "FP32", np.ascontiguousarray(poses, np.float32))], ["reconstruction"]
        )["reconstruction"]

    def warm_up(self, runs: int) -> float | None:
        """A round trip per run through both models, so the first request does not find the connection cold. Nothing
        to time for service.engine.cores: the engine runs the batches (None)."""
        s = self.card.image_size
        for _ in range(runs):
            self.predict(np.zeros((1, 1, s, s), np.float32))
        return None


def connect_engine(url: str, card: ModelCard, timeout_s: float, start_timeout_s: float) -> RemoteEngine:
    engine = RemoteEngine(url=url, card=card, timeout_s=timeout_s)
    _ = engine.host  # an unusable URL fails here, before any wait
    engine.connect(start_timeout_s)
    return engine
