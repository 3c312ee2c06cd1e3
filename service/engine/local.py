"""onnxruntime sessions for capsnet.onnx and decoder.onnx, on CUDA when there is one, else the CPU."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

from model import DECODER_FILE, FP32_FILE
from service.engine import cores
from service.engine.card import ModelCard, WeightsError, choose_precision, model_file_for
from service.engine.outputs import EXTRA_OUTPUTS, explained, fetched
from service.engine.tensors import Signature, TensorSpec

log = logging.getLogger("capsnet.engine")

PROVIDER_NAMES = {"cuda": "CUDAExecutionProvider", "cpu": "CPUExecutionProvider"}
# EXHAUSTIVE cuDNN search would make the first request (and every new batch shape) slow; HEURISTIC does not.
CUDA_OPTIONS = {"cudnn_conv_algo_search": "HEURISTIC", "do_copy_in_default_stream": "1"}


def device_of(provider: str) -> str:
    """The device an execution provider runs on, "GPU" or "CPU", as card.choose_precision takes it."""
    return "GPU" if provider == "CUDAExecutionProvider" else "CPU"


def choose_providers(preference: str, available: list[str] | None = None) -> list[tuple[str, dict[str, Any]]]:
    """Map 'cuda,cpu' onto what this onnxruntime build offers; say clearly when CUDA is asked for but absent."""
    available = available if available is not None else ort.get_available_providers()
    chosen: list[tuple[str, dict[str, Any]]] = []
    for key in [p.strip().lower() for p in preference.split(",") if p.strip()]:
        name = PROVIDER_NAMES.get(key)
        if name is None:
            raise ValueError(f"unknown execution provider {key!r}; use a list of: {', '.join(PROVIDER_NAMES)}")
        if name not in available:
            log.warning("%s requested but this onnxruntime offers only %s; falling back", name, available)
            continue
        chosen.append((name, CUDA_OPTIONS if key == "cuda" else {}))
    if not any(n == "CPUExecutionProvider" for n, _ in chosen):
        chosen.append(("CPUExecutionProvider", {}))
    return chosen


@dataclass
class Engine:
    capsnet: ort.InferenceSession
    decoder: ort.InferenceSession
    card: ModelCard
    model_file: str = FP32_FILE
    precision: str = "fp32"  # of the convolutions in model_file, as chosen (card.choose_precision), not read off the file name
    capsnet_busy: ort.InferenceSession | None = None  # fewer threads, for batches run while other requests are in flight
    # the counterfactual redraws behind recon_errors and is_digit, where the card's INT8 decoder met its bars and the
    # convolutions run in INT8 too (the CPU); None: the decoder itself
    counterfactual_decoder: ort.InferenceSession | None = None
    counterfactual_file: str = DECODER_FILE
    _signatures: dict[str, Signature] | None = field(default=None, repr=False)

    @property
    def provider(self) -> str:
        """The provider that runs the convolutions: the first one the session actually took."""
        return self.capsnet.get_providers()[0]

    @property
    def device(self) -> str:
        return device_of(self.provider)

    @property
    def session_providers(self) -> list[str]:
        return self.capsnet.get_providers()

    @property
    def busy_session(self) -> bool:
        return self.capsnet_busy is not None

    def signatures(self) -> dict[str, Signature]:
        """Read off the sessions once (16 us each, and /v2 asks on every request)."""
        if self._signatures is None:
            self._signatures = {
                name: (tuple(map(TensorSpec.of, s.get_inputs())), tuple(map(TensorSpec.of, s.get_outputs())))
                for name, s in (("capsnet", self.capsnet), ("decoder", self.decoder))
            }
        return self._signatures

    async def check_ready(self) -> bool:
        return True  # the sessions are in this process: loaded and warm before the app says ready

    def batch_workers(self, ms_per_image: float | None) -> int:
        if self.capsnet_busy is None:  # one session (a GPU, or threads alone == threads busy): one batch at a time
            return 1
        return cores.batches_in_flight(ms_per_image, cores.available_cores())

    def describe(self) -> dict[str, Any]:
        return {"kind": "local", "counterfactuals": self.counterfactual_file}

    def predict(
        self, images: np.ndarray, busy: bool = False, explain: np.ndarray | None = None, fetch: frozenset[str] = EXTRA_OUTPUTS
    ) -> dict[str, np.ndarray]:
        """images float32 [N,1,S,S] -> the graph's BASE_OUTPUTS and those of EXTRA_OUTPUTS in `fetch` (all of them unless
        told), and the counterfactuals of the rows `explain` marks (None: all).

        `busy`: other requests are in flight, so the event loop needs a core too; the session with fewer threads runs
        the batch (service/engine/cores.py says why)."""
        session = self.capsnet_busy if busy and self.capsnet_busy is not None else self.capsnet
        names = fetched(fetch)
        out = dict(zip(names, session.run(names, {"image": images})))
        return explained(self.redraw, out, images, explain)

    def reconstruct(self, digits: np.ndarray, poses: np.ndarray) -> np.ndarray:
        """digits int64 [N], poses float32 [N,16] -> [N,1,S,S]: decoder.onnx, for the pictures asked for by pose."""
        return self.decoder.run(["reconstruction"], {"digit": digits, "pose": poses})[0]

    def redraw(self, digits: np.ndarray, poses: np.ndarray) -> np.ndarray:
        """As reconstruct, for the counterfactuals of every answer: the INT8 decoder where there is one (a fifth of the
        fp32 decoder's CPU on one thread: model/quantize.py keeps it to where it turns no more than 0.1% of is_digit
        verdicts)."""
        session = self.counterfactual_decoder or self.decoder
        return session.run(["reconstruction"], {"digit": digits, "pose": poses})[0]

    def warm_up(self, runs: int) -> float | None:
        """Run the first (slow) calls before /readyz says yes: both batch shapes the batcher uses most, on each
        session. Returns the fastest ms per image of a batch of 8 on the busy session (None without runs or
        without a busy session)."""
        s = self.card.image_size
        best: float | None = None
        for _ in range(runs):
            for n in (1, 8):
                self.predict(np.zeros((n, 1, s, s), np.float32))
                if self.capsnet_busy is None:
                    continue
                t0 = time.perf_counter()  # timed as most batches run: without the outputs only some requests want
                self.predict(np.zeros((n, 1, s, s), np.float32), busy=True, fetch=frozenset())
                if n == 8:
                    ms = (time.perf_counter() - t0) * 1000.0 / n
                    best = ms if best is None else min(best, ms)
            self.reconstruct(np.zeros(1, np.int64), np.zeros((1, self.card.digit_dim), np.float32))
            self.redraw(np.zeros(9, np.int64), np.zeros((9, self.card.digit_dim), np.float32))
        return best


def placed_providers(names: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """The providers a session landed on, each with the options this module gives it: for more sessions on that device."""
    return [(n, CUDA_OPTIONS if n == PROVIDER_NAMES["cuda"] else {}) for n in names]


def open_session(path: Path, providers: list[tuple[str, dict[str, Any]]], threads: int) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    # Idle onnxruntime threads spin by default, burning the cores that the event loop, image decoding
    # and response encoding need between batches: measured here, spinning cost /predict a third of its throughput.
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    try:
        return ort.InferenceSession(str(path), opts, providers=providers)
    except Exception as e:  # onnxruntime raises its own exception types for corrupt files
        raise WeightsError(f"{path}: onnxruntime cannot load it: {e}") from e


def load_engine(
    weights_dir: Path, card: ModelCard, provider_preference: str, threads: int, precision: str = "fp32", busy_threads: int = 0
) -> Engine:
    """`precision`: auto, fp32 or int8 (card.choose_precision), resolved for the device the providers put the model on;
    `threads` for a lone batch (0: onnxruntime's default, one per physical core); `busy_threads` (0: the same)
    for batches run while other requests wait, on a second session of the same file (on the CPU only)."""
    providers = choose_providers(provider_preference)
    wanted = providers[0][0]
    chosen = choose_precision(card, precision, device_of(wanted))
    model_file = model_file_for(card, chosen)
    capsnet = open_session(weights_dir / model_file, providers, threads)
    placed = capsnet.get_providers()[0]
    if placed != wanted:
        log.warning("asked for %s, but onnxruntime placed the model on %s (its error above says why)", wanted, placed)
        # the remaining sessions go straight to where this one landed: onnxruntime would try, fail and print its
        # error again for each (seen in the GPU image run without CUDA: four times)
        providers = [p for p in providers if p[0] == placed] or providers
        # onnxruntime-gpu offers CUDA even where libcudart or the driver is missing, then runs on the CPU: there auto
        # means the CPU's choice, not the GPU's
        again = choose_precision(card, precision, device_of(placed))
        if again != chosen:
            log.warning("precision auto on %s: serving %s rather than %s", device_of(placed), again, chosen)
            chosen, model_file = again, model_file_for(card, again)
            capsnet = open_session(weights_dir / model_file, providers, threads)
    engine = Engine(
        capsnet=capsnet,
        decoder=open_session(weights_dir / DECODER_FILE, providers, threads),
        card=card,
        model_file=model_file,
        precision=chosen,
    )
    if busy_threads and busy_threads != threads and engine.provider == "CPUExecutionProvider":
        engine.capsnet_busy = open_session(weights_dir / model_file, providers, busy_threads)
    redraws = card.int8.decoder if card.int8 is not None and chosen == "int8" else None
    if redraws is not None and redraws.meets_bars and engine.provider == "CPUExecutionProvider":
        # on one thread, alone or under load: an image's nine redraws take about 0.1 ms, where a second thread saves
        # as much wall time as its hand-offs cost and adds half as much CPU again (BENCHMARKS.md's notes)
        engine.counterfactual_decoder = open_session(weights_dir / redraws.file, providers, 1)
        engine.counterfactual_file = redraws.file
    log.info(
        "model %s %s (%s, %s; counterfactuals by %s) on %s (session providers %s); intra-op threads %s alone, %s under load",
        card.name,
        card.version,
        model_file,
        engine.precision,
        engine.counterfactual_file,
        engine.provider,
        engine.capsnet.get_providers(),
        threads or "one per core",
        busy_threads if engine.capsnet_busy is not None else "the same",
    )
    return engine
