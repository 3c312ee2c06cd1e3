"""The MultiMNIST network beside the MNIST one: two overlapping digits in, both capsules and both redrawings out.

Its own onnxruntime sessions (weights/multimnist.onnx and its decoder), on the provider the MNIST engine landed on. It
is not batched: it answers the page's "two digits" mode and uploads asking `?model=multimnist`, a person at a time,
so each call runs in a thread, at most `MAX_AT_ONCE` at once so that the MNIST batches keep their cores.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import numpy as np
import onnxruntime as ort
from anyio import to_thread

from model import MULTIMNIST_DECODER_FILE, MULTIMNIST_FILE
from service.card import DigitRule, ModelCard, PairCard, verify_files
from service.engine import open_session, placed_providers
from service.errors import ClientError, Invalid
from service.inference import Signature
from service.oip import TensorSpec
from service.responses import picture, rounded

if TYPE_CHECKING:
    from fastapi import Request

    from service.state import AppState

log = logging.getLogger("capsnet.pairs")

OUTPUTS = ("lengths", "poses", "reconstructions")
NAME = "multimnist"  # ?model= on /predict, /reconstruct and /perturb; the model's name on the Open Inference Protocol
DECODER_NAME = "multimnist-decoder"


class NotServed(ClientError):
    status, code = 404, "model_not_served"


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

    async def predict(self, images: np.ndarray) -> dict[str, np.ndarray]:
        return await to_thread.run_sync(self.run, images, limiter=self.limiter)

    async def decode(self, digits: np.ndarray, poses: np.ndarray) -> np.ndarray:
        return await to_thread.run_sync(self.reconstruct, digits, poses, limiter=self.limiter)

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


def answer(
    engine: PairEngine, out: dict[str, np.ndarray], image: np.ndarray, blank_rule: DigitRule, with_pixels: bool = False
) -> dict[str, Any]:
    """One input's answer: the digits found (two, one, or none: never a second digit the capsules do not back), the two
    longest capsules' redrawings, and what the network saw. `image` [1,S,S]; blank as the MNIST card's rule says."""
    lengths = out["lengths"][0]
    ranked = [int(k) for k in np.argsort(-lengths, kind="stable")[:2]]
    blank = float(image.sum()) < blank_rule.blank_ink_below
    second = float(lengths[ranked[1]]) >= engine.card.second_digit.second_min_length
    found = [] if blank else ranked[: 2 if second else 1]
    card = engine.card
    return {
        "predictions": found,
        "ranked": ranked,
        "lengths": rounded(lengths),
        "poses": rounded(out["poses"][0]),
        "reconstructions": [picture(out["reconstructions"][0, k, 0], with_pixels) for k in range(2)],
        "input": picture(image[0], with_pixels),
        "blank": blank,
        "model": {"name": card.name, "version": card.version, "provider": engine.provider},
    }


class TestDigits:
    """MNIST's test digits, read once from `directory` when the page first asks for a random pair (None: not there)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._loaded: tuple[np.ndarray, np.ndarray] | None = None

    def available(self) -> bool:
        return self._loaded is not None or any((self.directory / f"t10k-images-idx3-ubyte{gz}").exists() for gz in (".gz", ""))

    def load(self) -> tuple[np.ndarray, np.ndarray]:
        if self._loaded is None:
            from model.idx import load_mnist

            self._loaded = load_mnist(self.directory, "test")
        return self._loaded


def sample_pair(images: np.ndarray, labels: np.ndarray, card: PairCard, rng: np.random.Generator) -> tuple[np.ndarray, list[int]]:
    """Two test digits of different classes on the canvas as model/multimnist.py makes test pairs: each centred, shifted up
    to the card's max_shift each way, added and clipped to [0,1]."""
    first = int(rng.integers(len(images)))
    second = int(rng.integers(len(images)))
    while labels[second] == labels[first]:
        second = int(rng.integers(len(images)))
    size, shift = card.image_size, card.input.max_shift
    canvas = np.zeros((size, size), np.float32)
    for i in (first, second):
        digit = images[i].astype(np.float32) / 255.0
        top, left = (size - digit.shape[0]) // 2 + rng.integers(-shift, shift + 1, 2)
        canvas[top : top + digit.shape[0], left : left + digit.shape[1]] += digit
    return np.minimum(canvas, 1.0), [int(labels[first]), int(labels[second])]
