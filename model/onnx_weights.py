"""Read the weights of an exported `capsnet.onnx` back into a PyTorch CapsNet, and store an exported file's weights at
half precision.

Why: the ONNX files are what the project commits, so the next training session resumes from them
(with a fresh optimiser) instead of from a checkpoint that lived on a machine that is gone. Each version of a file stays
in every clone: the two-digit network's weights, stored as float16 and cast back to float32 as onnxruntime loads the
file, take half the room in git for the same answers (docs/multimnist.md).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper
from torch import nn

from model.capsnet import CapsNet

log = logging.getLogger("capsnet.onnx_weights")

HALF_MIN_ELEMENTS = 1024  # filters and weight matrices go to float16; biases and the graph's small constants stay as they are
CAST_SUFFIX = "::float32"  # a half-precision weight's float32 copy, made by a Cast as the file loads


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
        arr = inits[k].astype(np.float32) if inits[k].dtype == np.float16 else inits[k]
        if tuple(arr.shape) != tuple(state[k].shape):
            raise ValueError(f"{onnx_path}: {k} has shape {arr.shape}, the model expects {tuple(state[k].shape)}")
        state[k] = torch.from_numpy(arr.copy())
    model.load_state_dict(state)
    card_path = onnx_path.with_name("model-card.json")
    return json.loads(card_path.read_text()) if card_path.exists() else {}


def round_to_half(model: nn.Module, min_elements: int = HALF_MIN_ELEMENTS) -> None:
    """Round the weights that `store_half` will store at half precision to the values it stores, in place: the parity
    check and every figure measured on the PyTorch model are then of the weights the file holds."""
    with torch.no_grad():
        for p in model.parameters():
            if p.dtype == torch.float32 and p.numel() >= min_elements:
                p.copy_(p.half().float())


def store_half(path: Path, min_elements: int = HALF_MIN_ELEMENTS) -> int:
    """Rewrite an exported file with its float32 weights of `min_elements` or more stored as float16, each read through a
    Cast to float32 at the top of the graph. The graph computes in float32 as before: onnxruntime folds the Casts into
    float32 constants when it loads the file (its default graph optimisation), so inference costs the same, and the
    initialisers keep their names (load_onnx_into reads them back). Returns how many weights were stored at half."""
    model = onnx.load(str(path))
    graph = model.graph
    if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for n in graph.node for a in n.attribute):
        raise ValueError(f"{path}: a graph with subgraphs may read a weight inside them; not rewritten")
    casts, renamed = [], {}
    for init in graph.initializer:
        if init.data_type != TensorProto.FLOAT or np.prod(init.dims) < min_elements:
            continue
        init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float16), init.name))
        renamed[init.name] = init.name + CAST_SUFFIX
        casts.append(helper.make_node("Cast", [init.name], [renamed[init.name]], name=init.name + "::cast", to=TensorProto.FLOAT))
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name in renamed:
                node.input[i] = renamed[name]
    nodes = [*casts, *graph.node]  # the Casts first: the graph's nodes stay in topological order
    del graph.node[:]
    graph.node.extend(nodes)
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return len(casts)
