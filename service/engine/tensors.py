"""The tensors a graph takes and gives, as the Open Inference Protocol names them: its data types, onnxruntime's names for
them, and each input's or output's name, type and shape. Engines describe their graphs in these (`signatures`), and the
protocol's codecs (service/oip) check requests and encode answers against them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import onnxruntime as ort
from tritonclient.utils import triton_to_np_dtype

# The protocol's tensor data types, and what numpy holds them in as tritonclient reads them (None: valid on the wire,
# no model here takes them: BYTES are Python objects, BF16 an extension type of ml_dtypes)
_NO_MODEL_TAKES = ("BF16", "BYTES")
DATATYPES: dict[str, np.dtype | None] = {
    name: None if name in _NO_MODEL_TAKES else np.dtype(triton_to_np_dtype(name))
    for name in ("BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64", "FP16", "FP32", "FP64") + _NO_MODEL_TAKES
}
ORT_TYPES = {
    "tensor(bool)": "BOOL",
    "tensor(uint8)": "UINT8",
    "tensor(uint16)": "UINT16",
    "tensor(uint32)": "UINT32",
    "tensor(uint64)": "UINT64",
    "tensor(int8)": "INT8",
    "tensor(int16)": "INT16",
    "tensor(int32)": "INT32",
    "tensor(int64)": "INT64",
    "tensor(float16)": "FP16",
    "tensor(float)": "FP32",
    "tensor(double)": "FP64",
    "tensor(bfloat16)": "BF16",
    "tensor(string)": "BYTES",
}


@dataclass(frozen=True)
class TensorSpec:
    name: str
    datatype: str
    shape: tuple[int, ...]  # -1: any size; the batch axis comes first

    @classmethod
    def of(cls, arg: ort.NodeArg) -> TensorSpec:
        """An onnxruntime input or output as the protocol describes it: named dynamic axes ('batch') become -1."""
        return cls(arg.name, ORT_TYPES.get(arg.type, arg.type), tuple(d if isinstance(d, int) else -1 for d in arg.shape))

    @property
    def dtype(self) -> np.dtype:
        dtype = DATATYPES[self.datatype]
        assert dtype is not None, f"{self.name}: no numpy type for {self.datatype}"
        return dtype

    def metadata(self) -> dict[str, Any]:
        return {"name": self.name, "datatype": self.datatype, "shape": list(self.shape)}


Signature = tuple[tuple[TensorSpec, ...], tuple[TensorSpec, ...]]  # a graph's inputs and outputs
