"""The MultiMNIST network beside the MNIST one: two overlapping digits in, both capsules and both redrawings out.

Its own onnxruntime sessions (weights/multimnist.onnx and its decoder), on the provider the MNIST engine landed on. It
is not batched: it answers the page's "two digits" mode and uploads asking `?model=multimnist`, a person at a time,
so each call runs in a thread, at most `MAX_AT_ONCE` at once so that the MNIST batches keep their cores.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

import anyio
import numpy as np
import onnxruntime as ort

from model import MULTIMNIST_DECODER_FILE, MULTIMNIST_FILE
from model.pair_rule import third_redrawing
from service.engine.batcher import Inference
from service.engine.card import ModelCard, PairCard, verify_files
from service.engine.local import open_session, placed_providers
from service.engine.tensors import Signature, TensorSpec
from service.threads import in_thread

log = logging.getLogger("capsnet.pairs")

OUTPUTS = ("lengths", "poses", "reconstructions")
NAME = "multimnist"  # ?model= on /predict, /reconstruct and /perturb; the model's name on the Open Inference Protocol
DECODER_NAME = "multimnist-decoder"


MAX_AT_ONCE = 1


@dataclass
class PairEngine:
    card: PairCard
    net: ort.InferenceSession
    decoder: ort.InferenceSession
    limiter: anyio.CapacityLimiter

    @property
    def provider(self) -> str:
        return self.net.get_providers()[0]

    def run(self, images: np.ndarray) -> dict[str, np.ndarray]:
        """[N,1,36,36] -> lengths [N,10], poses [N,10,16], reconstructions [N,2,1,36,36] (the two longest, longest first)."""
        return dict(zip(OUTPUTS, self.net.run(list(OUTPUTS), {"image": images})))

    def reconstruct(self, digits: np.ndarray, poses: np.ndarray) -> np.ndarray:
        return self.decoder.run(None, {"digit": digits, "pose": poses})[0]

    def run_with_third(self, images: np.ndarray) -> dict[str, np.ndarray]:
        """`run`, and where the card has a pair choice the third-longest capsule's redrawing, "third" [N,1,1,S,S]: the
        choice weighs the pairs that the three longest make (model/pair_rule.py)."""
        out = self.run(images)
        if self.card.pair_choice is not None:
            out["third"] = third_redrawing(self.reconstruct, out["lengths"], out["poses"])
        return out

    async def predict(self, images: np.ndarray) -> Inference:
        """The network in a thread, one call at a time (the limiter); not batched, so the wait for the limiter counts as
        the call's own time."""
        start = time.perf_counter()
        out = await in_thread(self.run, images, limiter=self.limiter)
        return Inference(out, 0.0, time.perf_counter() - start)

    async def read(self, images: np.ndarray) -> Inference:
        """As `predict`, with what /predict's answer reads beside the network's outputs (`run_with_third`)."""
        start = time.perf_counter()
        out = await in_thread(self.run_with_third, images, limiter=self.limiter)
        return Inference(out, 0.0, time.perf_counter() - start)

    async def decode(self, digits: np.ndarray, poses: np.ndarray) -> np.ndarray:
        return await in_thread(self.reconstruct, digits, poses, limiter=self.limiter)

    def signatures(self) -> dict[str, Signature]:
        """The two graphs' inputs and outputs as onnxruntime reads them, under their Open Inference Protocol names."""
        return {
            name: (tuple(map(TensorSpec.of, s.get_inputs())), tuple(map(TensorSpec.of, s.get_outputs())))
            for name, s in ((NAME, self.net), (DECODER_NAME, self.decoder))
        }


def load_pairs(weights_dir: Path, card: ModelCard, providers: list[str], threads: int, limiter: anyio.CapacityLimiter) -> PairEngine | None:
    """The pair network when the card has its entry (None otherwise: the service serves MNIST alone); its files are checked
    against their sha256 as the MNIST ones are."""
    entry = card.multimnist
    if entry is None:
        return None
    verify_files(weights_dir, entry, [MULTIMNIST_FILE, MULTIMNIST_DECODER_FILE])
    # the MNIST sessions' options (no spinning threads) and their error for a file onnxruntime cannot load
    placed = placed_providers(providers)
    net = open_session(weights_dir / MULTIMNIST_FILE, placed, threads)
    decoder = open_session(weights_dir / MULTIMNIST_DECODER_FILE, placed, threads)
    log.info("two-digit model %s %s on %s", entry.name, entry.version, net.get_providers()[0])
    engine = PairEngine(entry, net, decoder, limiter)
    engine.run(np.zeros((1, 1, entry.image_size, entry.image_size), np.float32))  # warm: the first run allocates
    return engine
