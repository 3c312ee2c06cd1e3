"""The model card that travels with the ONNX files: the service's one source of model constants."""
from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np


class WeightsError(RuntimeError):
    """The weights directory cannot be served: a file is missing, corrupt or not the one the card names."""


@dataclass(frozen=True)
class DigitRule:
    """When an input is blank, and when it is a digit at all: the card's `is_digit` section, written by
    `python -m model.calibrate` from MNIST (its figures are in the card beside the thresholds)."""

    blank_ink_below: float  # sum of the 28x28 input's ink: less is "nothing there" (preprocessing gives exact zeros)
    min_length: float  # the winning capsule's length
    max_recon_error: float  # the winning capsule's counterfactual reconstruction error (engine.recon_error)

    def judge(self, image: np.ndarray, lengths: np.ndarray, recon_errors: np.ndarray) -> tuple[bool, bool]:
        """(blank, is_digit) for one input [1,S,S] and its lengths [10] and errors [10]."""
        blank = float(image.sum()) < self.blank_ink_below
        winner = int(lengths.argmax())
        return blank, not blank and float(lengths[winner]) >= self.min_length and float(recon_errors[winner]) <= self.max_recon_error


@dataclass(frozen=True)
class ModelCard:
    raw: dict[str, Any]

    @property
    def name(self) -> str:
        return self.raw["name"]

    @property
    def version(self) -> str:
        return self.raw["version"]

    @property
    def image_size(self) -> int:
        return int(self.raw["architecture"]["image_size"])

    @property
    def num_classes(self) -> int:
        return int(self.raw["architecture"]["num_classes"])

    @property
    def digit_dim(self) -> int:
        return int(self.raw["architecture"]["digit_dim"])

    @property
    def num_primary(self) -> int:
        return int(self.raw["architecture"]["num_primary_capsules"])

    @property
    def primary_grid(self) -> int:
        return int(self.raw["architecture"]["primary_grid"])

    @property
    def primary_dim(self) -> int:
        return int(self.raw["architecture"]["primary_dim"])

    @property
    def primary_channels(self) -> int:
        return int(self.raw["architecture"]["primary_channels"])

    @functools.cached_property  # read on every /predict answer
    def digit_rule(self) -> DigitRule:
        rule = self.raw["is_digit"]["rule"]
        return DigitRule(float(rule["blank_ink_below"]), float(rule["min_length"]), float(rule["max_recon_error"]))

    @property
    def digit_box(self) -> int:
        return int(self.raw["input"]["mnist_digit_box"])


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
        card = ModelCard(raw)
        _ = (raw["files"], card.name, card.version, card.image_size, card.num_classes, card.digit_dim, card.num_primary, card.digit_box,
             card.digit_rule)
    except (KeyError, TypeError, ValueError) as e:
        hint = " (run `python -m model.calibrate` after an export)" if "is_digit" not in raw else ""
        raise WeightsError(f"model card {card_path} lacks a field the service needs: {e}{hint}") from e
    return card


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
    int8 = card.raw.get("int8") or {}
    return "int8" if device == "CPU" and int8.get("meets_bars") else "fp32"


def model_file_for(card: ModelCard, precision: str) -> str:
    """fp32: capsnet.onnx; int8: the file the card's int8 section names."""
    if precision == "fp32":
        return "capsnet.onnx"
    int8 = card.raw.get("int8") or {}
    if "file" not in int8:
        raise WeightsError("INT8 asked for, but the model card lists no INT8 model (run `python -m model.quantize`)")
    return int8["file"]


def choose_model_file(card: ModelCard, precision: str, device: str = "CPU") -> str:
    """The capsnet file a precision setting serves on a device (choose_precision, then model_file_for)."""
    return model_file_for(card, choose_precision(card, precision, device))


def verify_files(weights_dir: Path, card: ModelCard, names: list[str]) -> None:
    """Each file exists with the sha256 the card states: a truncated or swapped file stops start-up."""
    for name in names:
        path = weights_dir / name
        if not path.is_file():
            raise WeightsError(f"weights file missing: {path}")
        want = card.raw["files"].get(name, {}).get("sha256")
        got = _sha256(path)
        if want != got:
            raise WeightsError(f"{path}: sha256 {got[:16]}... differs from the model card's {str(want)[:16]}...; "
                               "the file is truncated, tampered with, or from another export")
