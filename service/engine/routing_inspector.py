"""The routing inspector: each iteration of dynamic routing for an input, from weights/routing.onnx (model/routing.py).

The trace takes the primary capsules the served graph already computed (its `primary` output), so the convolutions are
not run again: what it adds to a request is u_hat (1.5M multiply-adds) and R routing iterations, on one CPU thread,
whichever engine (local or remote) ran the convolutions. Iteration `trained` (3) is the served prediction.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime as ort

from service.engine.card import ModelCard, WeightsError
from service.errors import Invalid

log = logging.getLogger("capsnet.routing")
OUTPUTS = ("lengths", "coupling", "agreement")


@dataclass
class RoutingInspector:
    session: ort.InferenceSession
    card: ModelCard
    iterations: int
    trained: int

    def unroll(self, primary: np.ndarray) -> dict[str, np.ndarray]:
        """primary [N,1152,8] -> lengths [N,R,10], coupling and agreement [N,R,10,1152]."""
        return dict(zip(OUTPUTS, self.session.run(list(OUTPUTS), {"primary": primary})))

    def capsule_type(self, value: int | None) -> int | None:
        """The `routing_type` query parameter (service.deps): None for the mean over types, else a type 0..31."""
        if value is None:
            return None
        n = self.card.primary_channels
        if not 0 <= value < n:
            raise Invalid(f"routing_type must be `mean` or a capsule type 0-{n - 1}, got {value}")
        return value


def load_routing_inspector(weights_dir: Path, card: ModelCard) -> RoutingInspector | None:
    """None (and a warning) when the card has no routing section: ?include=routing then answers 404."""
    section = card.routing
    if not section:
        log.warning("the model card has no routing trace (run `python -m model.routing`): ?include=routing is off")
        return None
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1  # a few hundred microseconds of work: a second thread's hand-offs would cost more
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    path = weights_dir / section.file
    if not path.is_file():  # only a remote engine's front gets here (a local one verified every file): it may hold just the card
        log.warning("%s is not here: ?include=routing is off", path)
        return None
    try:
        session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    except Exception as e:  # onnxruntime raises its own exception types for missing or corrupt files
        raise WeightsError(f"{path}: onnxruntime cannot load it: {e}") from e
    return RoutingInspector(session, card, section.iterations, section.trained)
