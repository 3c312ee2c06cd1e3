"""What an ONNX graph declares at its edges: each input's and output's name, element type and shape."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import onnx

from service.engine.tensors import TensorSpec

# ONNX element type -> the Open Inference Protocol's data type, for the types an exported network uses
DATATYPES = {
    "FLOAT": "FP32",
    "FLOAT16": "FP16",
    "BFLOAT16": "BF16",
    "DOUBLE": "FP64",
    "INT8": "INT8",
    "INT16": "INT16",
    "INT32": "INT32",
    "INT64": "INT64",
    "UINT8": "UINT8",
    "BOOL": "BOOL",
}


@dataclass(frozen=True)
class Tensor:
    name: str
    elem_type: str  # onnx.TensorProto's name for it: FLOAT, INT64, ...
    shape: tuple[int | str, ...]  # a fixed size, or the name of a dynamic axis

    def spec(self) -> TensorSpec:
        """As the protocol describes it (what the service's engine reports of the same graph): named axes become -1."""
        try:
            datatype = DATATYPES[self.elem_type]
        except KeyError:
            raise ValueError(f"{self.name}: ONNX type {self.elem_type} has no Triton data type here") from None
        return TensorSpec(self.name, datatype, tuple(d if isinstance(d, int) else -1 for d in self.shape))


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
