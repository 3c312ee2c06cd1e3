"""The registry of the models the Open Inference Protocol serves, whatever the transport: which are served and in what
state (the model repository: load, unload), what each takes and gives, how each runs, its Triton configuration and
statistics, and how a failure is worded.

Why apart from the routes: the protocol is spoken twice, over REST (service/routers/oip.py) and over gRPC
(service/oip/grpc_server.py), and a client must not be able to tell the two apart by anything but the wire. Both call
these functions, so both see the same models, the same batcher and limits, the same errors with the same statuses,
the same per-phase metrics (service/phases.py) and one set of statistics per model.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from fastapi.exceptions import RequestValidationError
from tritonclient.grpc import model_config_pb2 as mc

from model import DECODER_FILE, MULTIMNIST_DECODER_FILE, MULTIMNIST_FILE
from service import loading
from service.engine.batcher import Inference
from service.engine.stats import Phases
from service.engine.two_digit import DECODER_NAME as PAIR_DECODER
from service.engine.two_digit import NAME as PAIRS
from service.errors import ClientError, classify
from service.group import SILENT
from service.oip.codec import InferRequest, ModelSpec, OIPError, bad
from service.oip.triton_config import PLATFORM, Serving, build_config
from service.phases import run_phases
from service.state import OIP_MODELS, AppState
from service.threads import in_thread

R = TypeVar("R")

VERSION = "1"  # the one version of each model, as in deploy/triton's repository (capsnet/1, decoder/1)
EXTENSIONS = ["binary_tensor_data", "model_configuration", "model_repository", "statistics"]


def failure(exc: Exception, where: str) -> tuple[int, str, dict[str, str] | None]:
    """(status, message, headers) as Triton maps its error kinds: the protocol's own errors as they say, else the
    service's one table (service/errors.py) with every other client error an invalid argument (400). gRPC takes the
    status through the same table's gRPC column (service.errors.grpc_code)."""
    if isinstance(exc, OIPError):
        return exc.status, exc.message, exc.headers
    f = classify(exc, where)
    if f.status == 503:
        return 503, f.detail, f.headers or {"Retry-After": "1"}
    if isinstance(exc, RequestValidationError):  # the first field's message alone, as Triton words its errors
        return 400, f.extra["errors"][0]["msg"] if f.extra["errors"] else "invalid request", None
    if isinstance(exc, ClientError):  # the body reader's (too large, bad Content-Length, a client gone): an invalid argument
        return 400, f.detail, f.headers
    return f.status, f.detail, f.headers


# ---- the models ----


def served(state: AppState) -> tuple[str, ...]:
    """The models this instance answers for: the two-digit ones only where they were loaded."""
    return OIP_MODELS if state.pair_engine is not None else OIP_MODELS[:2]


def decoder_max_batch(state: AppState) -> int:
    """Most decoder rows in one request: the most the service itself decodes at once (the nine counterfactuals of each
    image of a full batch, or a whole /perturb grid); the same rule as deploy/triton's max_batch_size for the decoder."""
    card, s = state.card, state.settings
    return max((card.num_classes - 1) * s.max_batch, card.digit_dim * s.max_deltas)


def known(name: str, version: str) -> None:
    """404 for a model or version that no instance of this service serves."""
    if name not in OIP_MODELS:
        raise OIPError(404, f"Request for unknown model: '{name}' is not found")
    if version not in ("", VERSION):
        raise OIPError(404, f"Request for unknown model: '{name}' version {version} is not found")


def spec(state: AppState, name: str, version: str) -> ModelSpec:
    """The model's signature, read from its onnxruntime session (right by construction): 404, then 503 until loaded."""
    known(name, version)
    engine = state.engine
    if not state.ready or engine is None:
        raise OIPError(503, f"model '{name}' is loading; retry shortly", {"Retry-After": "1"})
    if name in state.unloaded:  # Triton's words and status for a model unloaded from its repository
        raise OIPError(400, f"Request for unknown model: '{name}' has no available versions")
    if name in (PAIRS, PAIR_DECODER):
        if state.pair_engine is None:
            raise OIPError(
                404, f"Request for unknown model: '{name}' is not served here (no multimnist entry in the card, or a remote engine)"
            )
        inputs, outputs = state.pair_engine.signatures()[name]
        weights = state.pair_engine.card.version
    else:
        inputs, outputs = engine.signatures()[name]
        weights = engine.card.version
    max_batch = state.settings.max_batch if name in ("capsnet", PAIRS) else decoder_max_batch(state)
    return ModelSpec(name, inputs, outputs, max_batch, weights)


def config(state: AppState, name: str, version: str) -> mc.ModelConfig:
    """Triton's configuration of the model as this process serves it (service/oip/triton_config.py, the builder
    deploy/triton writes the repository with): `capsnet` batched as the batcher batches, with as many instances as it
    runs batches at once; the other graphs run as each request comes."""
    model, engine, s = spec(state, name, version), state.engine, state.settings
    kind = "gpu" if engine.device == "GPU" else "cpu"
    if name == "capsnet":
        serving = Serving(model.max_batch, kind, state.batcher.workers, round(s.max_wait_ms * 1000), warmup=False)
        file = engine.model_file
    else:
        serving = Serving(model.max_batch, kind, 1, None, warmup=False)
        file = {"decoder": DECODER_FILE, PAIRS: MULTIMNIST_FILE, PAIR_DECODER: MULTIMNIST_DECODER_FILE}[name]
    config = build_config(name, model.inputs, model.outputs, serving, platform=PLATFORM, model_file=file, group_name=name)
    config.parameters["weights_version"].string_value = model.weights_version  # the card's, which a reload changes
    return config


def statistics(state: AppState, name: str, version: str) -> list[dict]:
    """Triton's statistics of one model (`name`), or of every model served (`name` empty), as JSON."""
    if not name:
        return [s.as_json(m, VERSION) for m, s in state.oip_stats.items() if m in served(state)]
    known(name, version)
    if name not in served(state):
        raise OIPError(404, f"Request for unknown model: '{name}' is not served here")
    return [state.oip_stats[name].as_json(name, VERSION)]


async def server_ready(state: AppState) -> None:
    """503 until every model is loaded and warm, and while a remote engine says it is not ready."""
    if not state.ready:
        raise OIPError(503, "the models are loading; retry shortly", {"Retry-After": "1"})
    if state.group is not None and not state.group.all_ready():
        raise OIPError(503, "not every worker process is ready; retry shortly", {"Retry-After": "1"})
    if state.engine is not None and not await state.engine.check_ready():
        raise OIPError(503, f"the engine at {state.engine.describe().get('url')} is not ready", {"Retry-After": "1"})


# ---- the model repository extension: which versions, load (again) and unload ----


def repository_index(state: AppState, ready_only: bool = False) -> list[dict[str, str]]:
    """Each model with its state as Triton words it (READY, UNAVAILABLE with the reason, LOADING). The two-digit models
    are listed where the card has them; they load and unload with the rest, since one card describes them all."""
    names = served(state) if state.models is not None else OIP_MODELS[:2]
    index = []
    for name in names:
        if not state.ready:
            entry = {"name": name, "version": VERSION, "state": "LOADING", "reason": ""}
        elif name in state.unloaded:
            entry = {"name": name, "version": VERSION, "state": "UNAVAILABLE", "reason": "unloaded"}
        else:
            entry = {"name": name, "version": VERSION, "state": "READY", "reason": ""}
        if entry["state"] == "READY" or not ready_only:
            index.append(entry)
    return index


async def load(state: AppState, name: str, overrides: list[str]) -> None:
    """Load the weights directory again (service/loading.py: checked against the card, warmed, swapped in without
    downtime) and serve `name` again if it was unloaded. Every model reloads together: one card describes them all. A
    failed load is a 400 with the reason, as Triton answers it, and the version serving goes on. Triton's overrides (a
    config or files sent with the request) are refused: the repository is the weights directory and its card."""
    known(name, "")
    if overrides:
        raise OIPError(400, f"load overrides are not supported: {sorted(overrides)}; put the files in the weights directory")
    if not state.ready:
        raise OIPError(503, "the models are loading; retry shortly", {"Retry-After": "1"})
    start = time.monotonic()
    try:
        await loading.reload(state)
    except loading.LoadFailed as e:
        raise OIPError(400, f"failed to load '{name}': {e}") from None
    if name not in served(state):
        raise OIPError(400, f"failed to load '{name}': the model card has no multimnist entry")
    state.unloaded -= {name}
    if state.group is not None:  # the other worker processes load too (service/processes.py), and the answer waits for them
        generation = state.group.others_reload(state.unloaded)
        # they do the same work on the same cores as this one did, beside their own requests
        _group_failed(f"load '{name}'", await state.group.others_done(generation, OTHERS_LOAD_S + 3 * (time.monotonic() - start)))


async def unload(state: AppState, name: str) -> None:
    """Take `name` out of service until it is loaded again: its inference, metadata and readiness answer as Triton's do
    for a model with no available version; /predict and the page's routes answer 503 while `capsnet` is out."""
    known(name, "")
    state.unloaded |= {name}
    if state.group is not None:
        _group_failed(f"unload '{name}'", await state.group.others_done(state.group.others_unload(state.unloaded), OTHERS_UNLOAD_S))


OTHERS_LOAD_S = 10.0  # beyond three times this worker's own load, what a load waits for the other workers to load too
OTHERS_UNLOAD_S = 10.0  # what an unload waits for the others: a signal handled on each one's event loop


def _group_failed(what: str, failures: dict[int, str]) -> None:
    """A load or an unload that this worker did and some others did not: said as Triton says a failed load (400), or as
    a wait (503) where the others are still at it. The group then serves versions that differ until a load succeeds."""
    if not failures:
        return
    detail = "; ".join(f"worker {pid}: {why}" for pid, why in sorted(failures.items()))
    if all(why.startswith(SILENT) for why in failures.values()):
        raise OIPError(
            503, f"{what}: done by this worker, not yet by every other ({detail}); ask again to wait for them", {"Retry-After": "1"}
        )
    raise OIPError(400, f"failed to {what} on every worker process: {detail}")


# ---- running a model ----


async def _run_capsnet(state: AppState, req: InferRequest) -> Inference:
    wanted = frozenset(t.name for t, _ in req.outputs)  # the graph's outputs only, those asked for (all when none are named)
    return await state.batcher.submit(req.inputs["image"], state.settings.request_timeout_s, explain=False, fetch=wanted)


async def _run_decoder(state: AppState, req: InferRequest) -> Inference:
    digits, k = req.inputs["digit"], state.card.num_classes
    if digits.min() < 0 or digits.max() >= k:  # the graph would silently decode an all-zero mask
        raise bad(f"input 'digit': values must be digit capsules 0-{k - 1}")
    start = time.perf_counter()
    recon = await in_thread(state.engine.reconstruct, digits, req.inputs["pose"])
    return Inference({"reconstruction": recon}, 0.0, time.perf_counter() - start)


async def _run_pairs(state: AppState, req: InferRequest) -> Inference:
    assert state.pair_engine is not None  # spec() said so
    return await state.pair_engine.predict(req.inputs["image"])


async def _run_pair_decoder(state: AppState, req: InferRequest) -> Inference:
    assert state.pair_engine is not None
    digits, k = req.inputs["digit"], state.pair_engine.card.num_classes
    if digits.min() < 0 or digits.max() >= k:
        raise bad(f"input 'digit': values must be digit capsules 0-{k - 1}")
    start = time.perf_counter()
    recon = await state.pair_engine.decode(digits, req.inputs["pose"])
    return Inference({"reconstruction": recon}, 0.0, time.perf_counter() - start)


RUN: dict[str, Callable[[AppState, InferRequest], Awaitable[Inference]]] = {
    "capsnet": _run_capsnet,
    "decoder": _run_decoder,
    PAIRS: _run_pairs,
    PAIR_DECODER: _run_pair_decoder,
}


async def infer(
    state: AppState,
    model: ModelSpec,
    endpoint: str,
    parse: Callable[[], Awaitable[tuple[Awaitable[InferRequest], float]]],
    encode: Callable[[InferRequest, Inference], Awaitable[R]],
) -> R:
    """One inference, counted in the model's statistics whatever becomes of it: `parse` receives the request (the
    body's read on REST, nothing more on gRPC: the message is in) and hands back its parse, still to run, with the
    seconds the receiving took; then the phases (service/phases.py), under `endpoint` on /metrics."""
    stats = state.oip_stats[model.name]
    rows = 0

    def run(req: InferRequest) -> Awaitable[Inference]:
        nonlocal rows
        rows = req.batch
        return RUN[model.name](state, req)

    start = time.perf_counter()
    try:
        preprocess, received_s = await parse()
        timed = await run_phases(state.metrics, endpoint, preprocess, run, encode, model_name=model.name, payloads=state.payload_log)
    except Exception:
        stats.failed(int((time.perf_counter() - start) * 1e9))
        raise
    ns = 1e9
    model_ns = int(timed.inference.model_s * ns)
    queue_ns = max(int(timed.model_wall_s * ns) - model_ns, 0)
    # Triton's compute_input counts the body's read too
    input_ns = int((received_s + timed.preprocess_s) * ns)
    stats.succeeded(rows, Phases(input_ns, model_ns, int(timed.postprocess_s * ns), queue_ns=queue_ns))
    return timed.result
