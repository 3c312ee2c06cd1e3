"""What an ONNX graph declares at its edges: each input's and output's name, element type and shape."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import onnx


@dataclass(frozen=True)
class Tensor:
    name: str
    elem_type: str  # onnx.TensorProto's name for it: FLOAT, INT64, ...
    shape: tuple[int | str, ...]  # a fixed size, or the name of a dynamic axis


@dataclass(frozen=True)
class Signature:
    inputs: tuple[Tensor, ...]
    outputs: tuple[Tensor, ...]


def _tensor(value: onnx.ValueInfoProto) -> Tensor:
    t = value.type.tensor_type
    shape = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in t.shape.dim)
    return Tensor(value.name, onnx.TensorProto.DataType.Name(t.elem_type), shape)


def read_signature(path: Path) -> Signature:
    """The graph's declared inputs and outputs (initialisers excluded: opset >= 9 graphs may list weights as inputs)."""
    model = onnx.load(str(path), load_external_data=False)
    weights = {init.name for init in model.graph.initializer}
    return Signature(tuple(_tensor(v) for v in model.graph.input if v.name not in weights), tuple(_tensor(v) for v in model.graph.output))
