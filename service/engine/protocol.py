"""What the routes, the batcher and the lifespan need of whatever runs the two graphs: one `typing.Protocol`.

Two parts fit it: `local.Engine` (onnxruntime sessions in this process) and `remote.RemoteEngine` (an Open Inference
Protocol server: Triton, KServe, another instance of this service). Nothing above them asks which one it has: each
says what it is (`describe`, `provider`, `device`), what its graphs take and give (`signatures`), whether it can serve
now (`check_ready`) and how many batches it runs at once (`batch_workers`)."""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from service.engine.card import ModelCard
from service.engine.tensors import Signature


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
