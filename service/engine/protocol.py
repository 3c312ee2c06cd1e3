"""What the routes, the batcher and the lifespan need of whatever runs the two graphs: one `typing.Protocol`.

Two parts fit it: `engine.Engine` (onnxruntime sessions in this process) and `remote.RemoteEngine` (an Open Inference
Protocol server: Triton, KServe, another instance of this service). Nothing above them asks which one it has: each
says what it is (`describe`, `provider`, `device`), what its graphs take and give (`signatures`), whether it can serve
now (`check_ready`) and how many batches it runs at once (`batch_workers`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import onnxruntime as ort
from tritonclient.utils import triton_to_np_dtype

from service.engine.card import ModelCard

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


class InferenceEngine(Protocol):
    card: ModelCard
    model_file: str  # the capsnet file served (FP32_FILE or the INT8 one), or "remote"
    precision: str

    @property
    def provider(self) -> str:
        """The execution provider that runs the convolutions, or "remote"."""
        ...

    @property
    def device(self) -> str:
        """GPU, CPU, or "remote" when the engine does not say."""
        ...

    @property
    def session_providers(self) -> list[str]: ...

    @property
    def busy_session(self) -> bool:
        """Whether batches run under load take a second session with fewer threads (service/engine/cores.py)."""
        ...

    def signatures(self) -> dict[str, Signature]:
        """`capsnet` and `decoder`: what each graph takes and gives, as the engine reports it (-1: the batch axis)."""
        ...

    def predict(
        self, images: np.ndarray, busy: bool = False, explain: np.ndarray | None = None, fetch: frozenset[str] = ...
    ) -> dict[str, np.ndarray]:
        """images float32 [N,1,S,S] -> the capsnet graph's base outputs and those in `fetch` (service.engine.outputs.EXTRA_OUTPUTS,
        all of them by default), and counterfactuals for the rows `explain` marks."""
        ...

    def reconstruct(self, digits: np.ndarray, poses: np.ndarray) -> np.ndarray:
        """digits int64 [N], poses float32 [N,16] -> [N,1,S,S]."""
        ...

    def warm_up(self, runs: int) -> float | None:
        """The first calls, before /readyz says ready; the busy session's ms per image when it has one."""
        ...

    async def check_ready(self) -> bool:
        """Whether the graphs can be run now (a remote engine is asked, at most once a second)."""
        ...

    def batch_workers(self, ms_per_image: float | None) -> int:
        """Batcher threads when CAPSNET_WORKERS leaves it to the engine (service/engine/cores.py)."""
        ...

    def describe(self) -> dict[str, Any]:
        """/model's `engine` entry; /readyz adds its `url` when there is one."""
        ...
