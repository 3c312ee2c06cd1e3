"""The model card that travels with the ONNX files: the service's one source of model constants."""

from __future__ import annotations

import hashlib
import json
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from model import FP32_FILE, MNIST_DIGIT_BOX
from model.digit_rule import SIGNAL_NAMES, Scorer, judge
from model.pair_rule import DIGITS_SIGNAL_NAMES, PairChoice, PairRule, with_digits
from model.pair_rule import signals as pair_signals


class WeightsError(RuntimeError):
    """The weights directory cannot be served: a file is missing, corrupt or not the one the card names."""


class _Section(BaseModel):
    """A part of the card: the fields the service reads are typed and checked once, at load; the rest (figures,
    history) is kept as written, for GET /model."""

    model_config = ConfigDict(extra="allow", frozen=True)


class Architecture(_Section):
    image_size: int
    num_classes: int
    digit_dim: int
    primary_channels: int  # capsule types
    primary_dim: int
    primary_grid: int  # 6: primary capsule i = channel * grid^2 + row * grid + col
    primary_stride: int  # 2: cell (row, col) sees input pixels stride*row .. stride*row + receptive field
    num_primary_capsules: int
    routing_iterations: int


class InputSpec(_Section):
    mnist_digit_box: int  # the digit is scaled to fit this box, as MNIST's were


class FileEntry(_Section):
    sha256: str
    bytes: int


class TensorAt(_Section):
    offset: int  # of its little-endian float32 values in the file
    shape: list[int]


class DecoderSpec(_Section):
    """The decoder's own graph. `tensors`: where each dense layer lies inside its file (model/decoder_layout.py), for the
    page's decoder (static/capsule_decoder.js); a card written before that has none, and the page draws on the server."""

    tensors: dict[str, TensorAt] = {}


class DigitRule(_Section):
    """When an input is blank, and when it is a digit at all: the card's `is_digit` rule, fitted by
    `python -m model.calibrate` and run by model/digit_rule.py (numpy only, the code it was fitted with); what it was
    measured to do is in the card beside it."""

    blank_ink_below: float  # sum of the 28x28 input's ink: less is "nothing there" (preprocessing gives exact zeros)
    signals: list[str]  # model.digit_rule.SIGNAL_NAMES as the rule was fitted on them
    mean: list[float]
    scale: list[float]
    hidden_weight: list[list[float]]
    hidden_bias: list[float]
    out_weight: list[float]
    out_bias: float
    threshold: float

    @model_validator(mode="after")
    def _same_signals(self) -> DigitRule:
        if tuple(self.signals) != SIGNAL_NAMES:
            raise ValueError("is_digit.rule was fitted on other signals than model/digit_rule.py computes: run `python -m model.calibrate`")
        return self

    @cached_property
    def scorer(self) -> Scorer:
        return Scorer.from_rule(self.model_dump())

    def judge(self, images: np.ndarray, out: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, list[tuple[str, str] | None]]:
        """(blank [N], is_digit [N], why [N]: None for a digit, else the signal group and its phrase) for inputs
        [N,1,S,S] and the engine's `lengths`, `recon_errors` and `poses` of them."""
        return judge(self.scorer, self.blank_ink_below, images, out["lengths"], out["recon_errors"], out["poses"])


class IsDigit(_Section):
    rule: DigitRule


class Int8Decoder(_Section):
    file: str
    meets_bars: bool = False  # is_digit verdicts kept, speed and finite output, as model/quantize.py measured them


class Int8(_Section):
    file: str
    meets_bars: bool = False  # accuracy, speed and finite output, as model/quantize.py measured them
    decoder: Int8Decoder | None = None  # the counterfactual redraws beside the INT8 file; a card without it: decoder.onnx


class RoutingTrace(_Section):
    file: str
    iterations: int
    trained: int


class PairInput(_Section):
    pair_box: int  # an upload's two digits together are scaled so that their ink's longer side is this
    max_shift: int  # each digit of a pair is shifted up to this many px each way from the canvas centre
    # each digit of a pair is an MNIST digit fit to this box: two written apart are laid over so (a card from before it
    # was written down holds MNIST's own)
    mnist_digit_box: int = MNIST_DIGIT_BOX


class SecondDigit(_Section):
    """When the second-longest capsule is a second digit. `rule`: model/pair_rule.py's, fitted by bench/pair_paths.py on
    lone digits and pairs as they arrive through each path (its held-out figures beside it); a card without one has only
    `second_min_length`, the second capsule's length that model/export_multimnist.py set on test pairs."""

    second_min_length: float | None = None
    rule: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _one_of_them(self) -> SecondDigit:
        if self.rule is None and self.second_min_length is None:
            raise ValueError("multimnist.second_digit needs a rule or a second_min_length")
        if self.rule is not None:
            PairRule.from_card(self.rule)  # the signals it was fitted on are the ones computed here
        return self

    @cached_property
    def pair_rule(self) -> PairRule | None:
        return PairRule.from_card(self.rule) if self.rule is not None else None

    def two(self, s: np.ndarray, lengths: np.ndarray, path: str | None = None) -> np.ndarray:
        """[N] bool: a second digit is there, for the pair signals `s` [N,6] (model.pair_rule.signals) and lengths [N,10]
        of inputs that came by `path` (model.pair_rule.PATHS)."""
        if self.pair_rule is not None:
            return self.pair_rule.two(s, path)
        return np.sort(lengths, axis=1)[:, -2] >= self.second_min_length


class DigitsAtAll(_Section):
    """Whether a two-digit input holds digits at all, or something the network knows no digit in (a letter, a scribble,
    noise): model/pair_rule.py's read-out on DIGITS_SIGNAL_NAMES, fitted by bench/pair_paths.py on real inputs of each
    path against the `is_digit` rule's non-digits, each path's threshold turning away a set share of real inputs."""

    rule: dict[str, Any]

    @model_validator(mode="after")
    def _readable(self) -> DigitsAtAll:
        PairRule.from_card(self.rule, DIGITS_SIGNAL_NAMES)  # fitted on the signals computed here
        return self

    @cached_property
    def digits_rule(self) -> PairRule:
        return PairRule.from_card(self.rule, DIGITS_SIGNAL_NAMES)

    def present(self, s: np.ndarray, lengths: np.ndarray, poses: np.ndarray, path: str | None = None) -> np.ndarray:
        """[N] bool: the network reads digits in inputs that came by `path`, from their pair signals `s` [N,6], lengths
        [N,10] and poses [N,10,16]."""
        rule = self.digits_rule
        return rule.score(with_digits(s, lengths, poses)) >= rule.at(path)


class ChoiceOfPair(_Section):
    """Which two capsules a pair of digits is, of the three longest: model/pair_rule.py's PairChoice, fitted by
    bench/pair_paths.py on training pairs of every path (its held-out figures beside it). A card without it names the
    two longest, as the paper does."""

    rule: dict[str, Any]
    test_pairs: dict[str, Any] | None = None  # the fixed test pairs read by the two longest and by the choice

    @model_validator(mode="after")
    def _readable(self) -> ChoiceOfPair:
        PairChoice.from_card(self.rule)  # fitted on the signals computed here
        return self

    @cached_property
    def choice(self) -> PairChoice:
        return PairChoice.from_card(self.rule)


class PairScore(_Section):
    """How the exported network did on the fixed test pairs (onnxruntime): what the page tells a person to expect."""

    pairs: int
    both_right: float | None = None


class _NetworkCard(_Section):
    """What the card says of each network it describes, the MNIST one and the two-digit one, in the same words."""

    name: str
    version: str
    architecture: Architecture
    files: dict[str, FileEntry]
    decoder: DecoderSpec = DecoderSpec()

    # the sizes the code reads most, by the names it uses
    image_size = property(lambda self: self.architecture.image_size)
    num_classes = property(lambda self: self.architecture.num_classes)
    digit_dim = property(lambda self: self.architecture.digit_dim)


class PairCard(_NetworkCard):
    """The card's `multimnist` entry: the network that reads two overlapping digits (model/export_multimnist.py)."""

    input: PairInput
    second_digit: SecondDigit
    digits: DigitsAtAll | None = None  # a card without it: every input with ink holds digits
    pair_choice: ChoiceOfPair | None = None  # a card without it: a pair is the two longest capsules
    test: PairScore | None = None

    def read(
        self, lengths: np.ndarray, poses: np.ndarray, reconstructions: np.ndarray, images: np.ndarray, path: str | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """([N] bool a second digit is there, [N] bool digits are there at all) for the network's lengths [N,10], poses
        [N,10,16] and two redrawings [N,2,1,S,S] of `images` that came by `path`: both rules on signals computed once."""
        s = pair_signals(lengths, reconstructions, images)
        present = self.digits.present(s, lengths, poses, path) if self.digits is not None else np.ones(len(s), bool)
        return self.second_digit.two(s, lengths, path), present


class ModelCard(_NetworkCard):
    """weights/model-card.json as the service reads it (model/export.py, quantize.py, calibrate.py and routing.py write it)."""

    input: InputSpec
    is_digit: IsDigit
    int8: Int8 | None = None
    routing: RoutingTrace | None = None
    multimnist: PairCard | None = None  # served beside the MNIST network when present

    num_primary = property(lambda self: self.architecture.num_primary_capsules)
    primary_grid = property(lambda self: self.architecture.primary_grid)
    primary_dim = property(lambda self: self.architecture.primary_dim)
    primary_channels = property(lambda self: self.architecture.primary_channels)
    digit_box = property(lambda self: self.input.mnist_digit_box)
    digit_rule = property(lambda self: self.is_digit.rule)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def load_card(weights_dir: Path) -> ModelCard:
    """Read model-card.json and check it has every field the service needs."""
    card_path = weights_dir / "model-card.json"
    try:
        raw = json.loads(card_path.read_text())
    except FileNotFoundError as e:
        raise WeightsError(f"model card not found: {card_path}") from e
    except (OSError, ValueError) as e:
        raise WeightsError(f"model card unreadable: {card_path}: {e}") from e
    try:
        return ModelCard.model_validate(raw)
    except ValidationError as e:
        where = ", ".join(".".join(map(str, err["loc"])) + f" ({err['msg']})" for err in e.errors())
        hint = " (run `python -m model.calibrate` after an export)" if "is_digit" not in raw else ""
        raise WeightsError(f"model card {card_path} lacks a field the service needs: {where}{hint}") from e


def choose_precision(card: ModelCard, setting: str, device: str) -> str:
    """The precision a CAPSNET_PRECISION setting means on a device ("CPU" or "GPU"): fp32 and int8 pin one; auto is int8
    only on the CPU, and only when the card says the INT8 file met its bars (accuracy, speed, finite output).

    Why not on a GPU: the INT8 file is QDQ (quantise/dequantise pairs around each convolution, model/quantize.py). The CPU
    provider fuses those into integer convolutions, twice as fast as FP32 here; the CUDA provider has no such kernels and
    runs each one as dequantise + FP32 convolution, which is slower than the FP32 file it was made from."""
    if setting in ("fp32", "int8"):
        return setting
    if setting != "auto":
        raise ValueError(f"unknown precision {setting!r}; use auto, fp32 or int8")
    return "int8" if device == "CPU" and card.int8 is not None and card.int8.meets_bars else "fp32"


def model_file_for(card: ModelCard, precision: str) -> str:
    """fp32: capsnet.onnx; int8: the file the card's int8 section names."""
    if precision == "fp32":
        return FP32_FILE
    if card.int8 is None:
        raise WeightsError("INT8 asked for, but the model card lists no INT8 model (run `python -m model.quantize`)")
    return card.int8.file


def choose_model_file(card: ModelCard, precision: str, device: str = "CPU") -> str:
    """The capsnet file a precision setting serves on a device (choose_precision, then model_file_for)."""
    return model_file_for(card, choose_precision(card, precision, device))


def verify_files(weights_dir: Path, card: ModelCard | PairCard, names: list[str]) -> None:
    """Each file exists with the sha256 the card states: a truncated or swapped file stops start-up."""
    for name in names:
        path = weights_dir / name
        if not path.is_file():
            raise WeightsError(f"weights file missing: {path}")
        entry = card.files.get(name)
        want = entry.sha256 if entry else None
        got = _sha256(path)
        if want != got:
            raise WeightsError(
                f"{path}: sha256 {got[:16]}... differs from the model card's {str(want)[:16]}...; "
                "the file is truncated, tampered with, or from another export"
            )
