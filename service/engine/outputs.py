"""What an engine answers, whoever runs the graph: the outputs every answer reads and those only some ask for, and the
counterfactual redrawings the service adds to them. Engine-neutral: the onnxruntime engine here (local.py) and a remote
Open Inference Protocol server (remote.py) both answer through it, so neither knows the other."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from model.digit_rule import recon_error

# What every answer reads; and what only some ask for, fetched for a batch when one of its requests does (a remote
# engine sends 83 KB of them an image, against 3.8 KB of the rest): `coupling` for ?include=coupling[_grid] and the
# protocol, `primary`, the 1152 primary capsules, which the routing inspector (service/engine/routing_inspector.py) routes again
BASE_OUTPUTS = ("lengths", "poses", "reconstruction")
EXTRA_OUTPUTS = frozenset({"coupling", "primary"})
OUTPUTS = (*BASE_OUTPUTS, *sorted(EXTRA_OUTPUTS))


def fetched(fetch: frozenset[str]) -> list[str]:
    """BASE_OUTPUTS, then those of `fetch` the graph has, in a fixed order: a name no graph output carries is ignored
    here rather than failing the whole batch in onnxruntime (the protocol's router has refused unknown names already)."""
    return [*BASE_OUTPUTS, *sorted(fetch & EXTRA_OUTPUTS)]


def counterfactuals(
    reconstruct: Callable[[np.ndarray, np.ndarray], np.ndarray], out: dict[str, np.ndarray], images: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The decoder (`reconstruct`: digits [M], poses [M,16] -> [M,1,S,S]) on every digit capsule's own pose, in one call
    per batch, and how far each redraw is from the input: images [N,10,S,S] and errors [N,10]. The winner's redraw is
    the graph's own `reconstruction` (the decoder's layers on the same pose), so the decoder runs the other nine: on the
    CPU, beside the INT8 network, in INT8 too (the engine's `redraw`).

    Why: a digit the network has really seen is redrawn well by its capsule and badly by the others; an input no
    capsule can redraw is not a digit (the paper's Figure 3; Frosst, Sabour & Hinton's DARCCC). What the decoder
    runs per image cost: BENCHMARKS.md, Real input."""
    poses = out["poses"]
    n, k, _ = poses.shape
    rows = np.arange(n)
    winners = out["lengths"].argmax(1)
    others = np.ones((n, k), bool)
    others[rows, winners] = False
    recon = np.empty((n, k, *images.shape[-2:]), np.float32)
    if n:
        digits = np.broadcast_to(np.arange(k, dtype=np.int64), (n, k))[others]
        recon[others] = reconstruct(digits, poses[others])[:, 0]
    recon[rows, winners] = out["reconstruction"][:, 0]
    return recon, recon_error(images[:, 0], recon)


def explained(
    reconstruct: Callable[[np.ndarray, np.ndarray], np.ndarray],
    out: dict[str, np.ndarray],
    images: np.ndarray,
    explain: np.ndarray | None,
) -> dict[str, np.ndarray]:
    """The graph's outputs with `counterfactuals` and `recon_errors` added for the rows `explain` marks (None: all):
    /predict reads them for every image, the protocol's `capsnet` and /probe never, and a batch can hold both kinds.
    Rows not explained hold zeros."""
    if explain is None or explain.all():
        out["counterfactuals"], out["recon_errors"] = counterfactuals(reconstruct, out, images)
        return out
    n, k, s = len(images), out["lengths"].shape[1], images.shape[-1]
    out["counterfactuals"], out["recon_errors"] = np.zeros((n, k, s, s), np.float32), np.zeros((n, k), np.float32)
    if explain.any():
        part = {name: out[name][explain] for name in ("poses", "lengths", "reconstruction")}
        out["counterfactuals"][explain], out["recon_errors"][explain] = counterfactuals(reconstruct, part, images[explain])
    return out
