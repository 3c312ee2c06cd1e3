"""Read the weights of an exported `capsnet.onnx` back into a PyTorch CapsNet.

Why: the ONNX files are what the project commits, so the next training session resumes from them
(with a fresh optimiser) instead of from a checkpoint that lived on a machine that is gone.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import onnx
import torch
from onnx import numpy_helper

from model.capsnet import CapsNet

log = logging.getLogger("capsnet.onnx_weights")


def load_onnx_into(model: CapsNet, onnx_path: str | Path, prefix: str = "") -> dict:
    """Copy every parameter of `model` from the ONNX initializer of the same name (after `prefix`, the name of the module
    that wrapped the network for export); returns the model card."""
    onnx_path = Path(onnx_path)
    graph = onnx.load(str(onnx_path)).graph
    inits = {i.name.removeprefix(prefix): numpy_helper.to_array(i) for i in graph.initializer if i.name.startswith(prefix)}
    state = model.state_dict()
    missing = [k for k in state if k not in inits]
    if missing:
        raise ValueError(f"{onnx_path}: no initializer for {missing}; was it exported by model/export.py?")
    for k in state:
        arr = inits[k]
        if tuple(arr.shape) != tuple(state[k].shape):
            raise ValueError(f"{onnx_path}: {k} has shape {arr.shape}, the model expects {tuple(state[k].shape)}")
        state[k] = torch.from_numpy(arr.copy())
    model.load_state_dict(state)
    card_path = onnx_path.with_name("model-card.json")
    return json.loads(card_path.read_text()) if card_path.exists() else {}
