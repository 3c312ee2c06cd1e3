"""Lay out a Triton model repository: <model>/config.pbtxt and <model>/1/model.onnx for the network and its decoder, and
where the card has it, the two-digit network and its decoder (`multimnist`, `multimnist-decoder`).

The model.onnx files are relative symbolic links into weights/ by default, so the repository adds no copy of the
weights to git and follows every re-export; `copy=True` writes real files, for object storage (KServe's storageUri)
or anything else that does not follow links. Either way the files are checked against the card's sha256 first.
"""

from __future__ import annotations

import logging
import os
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

from deploy.triton.config import Serving, build_config, to_pbtxt
from deploy.triton.graph import read_signature
from model import DECODER_FILE, MULTIMNIST_DECODER_FILE, MULTIMNIST_FILE
from service.engine.card import ModelCard, PairCard, choose_precision, model_file_for, verify_files

log = logging.getLogger("capsnet.deploy.triton")

CAPSNET, DECODER = "capsnet", "decoder"  # the model names a client asks Triton for
PAIRS, PAIR_DECODER = "multimnist", "multimnist-decoder"  # as the service's Open Inference Protocol names them
VERSION = "1"


@dataclass(frozen=True)
class Model:
    name: str
    source: str  # file name in the weights directory
    precision: str
    serving: Serving


def plan(card: ModelCard, precision: str, serving: Serving, decoder_max_batch: int) -> list[Model]:
    """Which file each Triton model serves. The network's precision is chosen as the service chooses it
    (service.engine.card.choose_precision): auto is FP32 on a GPU instance, INT8 on a CPU one when the card says it met its bars."""
    if serving.tensorrt_fp16 and serving.kind != "gpu":
        raise ValueError("the TensorRT accelerator runs on a GPU instance only")
    chosen = choose_precision(card, precision, serving.kind.upper())
    if serving.tensorrt_fp16 and chosen != "fp32":
        raise ValueError("TensorRT FP16 is built from the FP32 file; leave --precision at auto or fp32")
    models = [
        Model(CAPSNET, model_file_for(card, chosen), chosen, serving),
        Model(DECODER, DECODER_FILE, "fp32", replace(serving, max_batch_size=decoder_max_batch)),
    ]
    if card.multimnist is not None:  # FP32: there is no INT8 file of the two-digit network
        models += [
            Model(PAIRS, MULTIMNIST_FILE, "fp32", serving),
            Model(PAIR_DECODER, MULTIMNIST_DECODER_FILE, "fp32", replace(serving, max_batch_size=decoder_max_batch)),
        ]
    return models


def _entry(card: ModelCard, m: Model) -> ModelCard | PairCard:
    """The part of the card that lists the model's file: the two-digit network has its own entry."""
    return card.multimnist if m.name in (PAIRS, PAIR_DECODER) and card.multimnist is not None else card


def _place(source: Path, target: Path, copy: bool) -> None:
    if target.is_symlink() or target.exists():
        target.unlink()
    if copy:
        shutil.copyfile(source, target)
    else:
        target.symlink_to(os.path.relpath(source.resolve(), target.parent.resolve()))


def write_repository(weights: Path, card: ModelCard, out: Path, models: list[Model], copy: bool = False) -> list[Path]:
    """Write each model's config.pbtxt and version folder; returns the config files written."""
    for m in models:
        verify_files(weights, _entry(card, m), [m.source])
    written = []
    for m in models:
        source = weights / m.source
        config = build_config(m.name, read_signature(source), m.serving)
        entry = _entry(card, m)
        header = (
            f"Written by `python -m deploy.triton` from {m.source} ({m.precision}) and the model card of {entry.name} {entry.version};\n"
            "regenerate rather than edit (tests/deploy checks this file against the ONNX graph)."
        )
        folder = out / m.name
        (folder / VERSION).mkdir(parents=True, exist_ok=True)
        (folder / "config.pbtxt").write_text(to_pbtxt(config, header))
        _place(source, folder / VERSION / "model.onnx", copy)
        written.append(folder / "config.pbtxt")
        log.info("%s: %s (%s), max batch %d, %s", m.name, m.source, m.precision, m.serving.max_batch_size, "copied" if copy else "linked")
    return written
