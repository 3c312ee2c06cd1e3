"""The dimension atlas: what each of the 160 pose dimensions does to the decoder's image, measured, for either network.

For every digit capsule k and pose dimension d, d is swept over the paper's range (-0.25..0.25, step 0.05) on the
poses of many real MNIST test digits of class k (alone for the MNIST network; for the two-digit one, in MultiMNIST test
pairs, where the network finds them among the two longest capsules), each pose is decoded, and each image is measured (Morpho-MNIST's
kind of measures, Castro et al. 2019, computed here from image moments: ink, stroke thickness, width, height,
slant, and the centroid's x and y). A measure's effect is its least-squares slope against the shift, per +0.1, in
the measure's own units and in standard deviations of that measure over those real test digits of class k, as placed
(at least 1 px for the centroid, which MNIST's centring pins). A dimension
is labelled by the measure it moves most in standard deviations when that measure dominates (at least
`--dominance` times the next one of another kind: ink and thickness move together) and the sweep moves it
monotonically, in the recorded direction, for at least `--monotonic` of the poses; otherwise `local`, the paper's
"localised part". So a label is a claim the committed figures back, and tests/model/test_atlas.py checks it again on
the decoder.

`python -m model.atlas` writes weights/dimensions.json (served by GET /dimensions, shown on the page's sliders);
`--network multimnist` writes weights/multimnist-dimensions.json (GET /dimensions?model=multimnist, section 7's sliders).
"""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from model import ATLAS_FILES, DECODER_FILE, FP32_FILE, MNIST_DIR, MULTIMNIST_DECODER_FILE, MULTIMNIST_FILE
from model.cli import log_to_console
from model.data import load_mnist

log = logging.getLogger("capsnet.atlas")

DELTAS = np.round(np.arange(-0.25, 0.2501, 0.05), 2)  # the paper's Figure 4 range
MEASURES = ("ink", "thickness", "width", "height", "slant", "x", "y")
# MNIST is centred by mass, so its digits' centroids hardly vary (0.3 px): a shift is standardised against at least 1 px,
# what a reader sees move, or every small translation would outrank a real change of shape.
SPREAD_FLOOR = {"x": 1.0, "y": 1.0}
FAMILY = {"ink": "ink", "thickness": "ink"}
DECODERS = {"capsnet": DECODER_FILE, "multimnist": MULTIMNIST_DECODER_FILE}  # the decoder each network's atlas measures
# The share of poses a sweep must move monotonically for a label. Poses read from overlapping digits vary more: at 70%,
# five of the two-digit network's labels sat at 70-75% and one held for only 58% of the next 60 poses; at 80% the least
# held for 73% of them, and for 75% of poses from pairs as the service rescales them (the MNIST atlas's least: 79%).
MONOTONIC = {"capsnet": 0.7, "multimnist": 0.8}
UNITS = {"ink": "of the ink", "thickness": "px", "width": "px", "height": "px", "slant": "deg", "x": "px", "y": "px"}


def measure(images: np.ndarray) -> dict[str, np.ndarray]:
    """images [..., S, S] in [0,1] -> each measure [...]: ink (sum), thickness (ink over its length, the length taken
    from the second moments' major axis), width and height (4 standard deviations of the ink along x and y, 95%
    of a uniform stroke's extent), slant (degrees the major axis leans right of vertical), centroid x and y (px)."""
    s = images.shape[-1]
    ink = images.sum((-2, -1))
    w = np.maximum(ink, 1e-6)
    coords = np.arange(s, dtype=np.float64)
    cx = (images.sum(-2) * coords).sum(-1) / w
    cy = (images.sum(-1) * coords).sum(-1) / w
    dx = coords - cx[..., None]
    dy = coords - cy[..., None]
    vxx = (images.sum(-2) * dx**2).sum(-1) / w
    vyy = (images.sum(-1) * dy**2).sum(-1) / w
    vxy = (images * dy[..., :, None] * dx[..., None, :]).sum((-2, -1)) / w
    major = np.sqrt(np.maximum((vxx + vyy) / 2 + np.sqrt(((vxx - vyy) / 2) ** 2 + vxy**2), 1e-6))
    return {
        "ink": ink,
        "thickness": ink / (4 * major),
        "width": 4 * np.sqrt(vxx),
        "height": 4 * np.sqrt(vyy),
        "slant": np.degrees(np.arctan2(-vxy, vyy)),
        "x": cx,
        "y": cy,
    }


def sweep(decoder, digit: int, poses: np.ndarray, dim: int) -> np.ndarray:
    """poses [N,16] of capsule `digit` with dimension `dim` shifted by each delta -> images [N, len(DELTAS), S, S]."""
    n, d = poses.shape
    shifted = np.repeat(poses[:, None], len(DELTAS), 1).astype(np.float32)
    shifted[:, :, dim] += DELTAS.astype(np.float32)
    out = decoder.run(["reconstruction"], {"digit": np.full(n * len(DELTAS), digit, np.int64), "pose": shifted.reshape(-1, d)})[0]
    return out.reshape(n, len(DELTAS), *out.shape[-2:])


def monotonic_share(values: np.ndarray, direction: int) -> float:
    """Share of rows [N, len(DELTAS)] that never step against `direction` by more than noise (1% of their range)."""
    steps = np.diff(values, axis=1) * direction
    tolerance = 0.01 * np.maximum(np.ptp(values, axis=1, keepdims=True), 1e-9)
    return float((steps >= -tolerance).all(1).mean())


def describe(decoder, digit: int, poses: np.ndarray, spread: dict[str, float], dominance: float, monotonic: float) -> list[dict]:
    dims = []
    for d in range(poses.shape[1]):
        m = measure(sweep(decoder, digit, poses, d).astype(np.float64))
        centred = DELTAS - DELTAS.mean()
        slopes = {k: (m[k] - m[k].mean(1, keepdims=True)) @ centred / (centred @ centred) * 0.1 for k in MEASURES}  # per +0.1, per pose
        raw = {k: float(np.median(v)) for k, v in slopes.items()}
        standard = {k: raw[k] / spread[k] for k in MEASURES}
        order = sorted(MEASURES, key=lambda k: -abs(standard[k]))
        top = order[0]
        # ink and thickness move together (thicker strokes are more ink): the runner-up is the best of another kind
        second = next(k for k in order[1:] if FAMILY.get(k, k) != FAMILY.get(top, top))
        direction = 1 if raw[top] > 0 else -1
        mono = monotonic_share(m[top], direction)
        consistency = float((np.sign(slopes[top]) == direction).mean())
        label = top if abs(standard[top]) >= dominance * abs(standard[second]) and mono >= monotonic else "local"
        dims.append(
            {
                "dim": d,
                "label": label,
                "measure": top,
                "direction": direction,
                "effect_per_0.1": round(raw[top] * (100 if top == "ink" else 1) / (m["ink"].mean() if top == "ink" else 1), 3),
                "unit": "%" if top == "ink" else UNITS[top],
                "standardised_per_0.1": round(standard[top], 3),
                "runner_up": second,
                "runner_up_standardised_per_0.1": round(standard[second], 3),
                "consistency": round(consistency, 3),
                "monotonic": round(mono, 3),
                "effects_standardised_per_0.1": {k: round(v, 3) for k, v in standard.items()},
            }
        )
    return dims


Classes = Iterator[tuple[int, np.ndarray, np.ndarray]]  # each digit k, its capsule's poses [N,16], real digits of class k [M,S,S]


def capsnet_classes(weights: Path, data: Path, per_class: int) -> tuple[str, dict[str, int], Classes]:
    """The MNIST network's version, what was read, and for each class k: the poses of capsule k on up to `per_class`
    test digits of class k that it reads as k, and those digits (what a spread of each measure is taken over)."""
    import onnxruntime as ort

    card = json.loads((weights / "model-card.json").read_text())
    capsnet = ort.InferenceSession(str(weights / FP32_FILE), providers=["CPUExecutionProvider"])
    images, labels = load_mnist(data, "test")
    x = (images / np.float32(255.0)).astype(np.float32)

    def classes() -> Classes:
        for k in range(card["architecture"]["num_classes"]):
            own = x[labels == k]
            lengths, poses = capsnet.run(["lengths", "poses"], {"image": own[:, None]})
            right = lengths.argmax(1) == k
            yield k, poses[right, k][:per_class], own[right]

    return card["version"], {"poses_per_digit": per_class}, classes()


def pair_poses(lengths: np.ndarray, poses: np.ndarray, labels: np.ndarray, digit: int) -> tuple[np.ndarray, np.ndarray]:
    """On MultiMNIST pairs (the network's `lengths` [B,10] and `poses` [B,10,16], `labels` [B,2]) holding `digit`, where the
    network finds it (its capsule among the two longest): capsule `digit`'s poses [M,16], and the pair and place [M,2] of
    each such digit, in the pairs' order."""
    rows, which = np.nonzero(labels == digit)
    found = (np.argsort(-lengths[rows], 1)[:, :2] == digit).any(1)
    return poses[rows[found], digit], np.stack([rows[found], which[found]], 1)


def multimnist_classes(weights: Path, data: Path, per_class: int, pairs: int) -> tuple[str, dict[str, int], Classes]:
    """The two-digit network's version, what was read, and for each class k: the poses of capsule k on up to
    `per_class` of the first `pairs` of the 10,000 fixed MultiMNIST test pairs (the card's) that hold k and where the
    network finds it, and those digits alone, where they sit in the pair (the spread of a measure is over them: shifted up
    to 4 px, their centroids vary)."""
    import onnxruntime as ort
    import torch

    from model.multimnist import fixed_test_pairs

    card = json.loads((weights / "model-card.json").read_text())["multimnist"]
    net = ort.InferenceSession(str(weights / MULTIMNIST_FILE), providers=["CPUExecutionProvider"])
    images, labels = load_mnist(data, "test")
    x = torch.from_numpy((images / np.float32(255.0)).astype(np.float32)[:, None])
    made = fixed_test_pairs(x, torch.from_numpy(labels.astype(np.int64)))  # all of them: a count of its own would draw others
    composites, alone, pair_labels = (t[:pairs].numpy() for t in (made.image, made.digits, made.labels))
    outputs = [net.run(["lengths", "poses"], {"image": composites[at : at + 250]}) for at in range(0, pairs, 250)]
    lengths, poses = (np.concatenate([o[i] for o in outputs]) for i in (0, 1))

    def classes() -> Classes:
        for k in range(card["architecture"]["num_classes"]):
            own, found = pair_poses(lengths, poses, pair_labels, k)
            yield k, own[:per_class], alone[found[:, 0], found[:, 1], 0]

    return card["version"], {"poses_per_digit": per_class, "test_pairs": pairs}, classes()


def build(decoder: Any, version: str, read: dict[str, int], classes: Classes, num_classes: int, dominance: float, monotonic: float) -> dict:
    """The atlas of `decoder` over `classes` (each digit k, the poses of its capsule, and real digits of class k)."""
    described = []
    for k, poses, real in tqdm(classes, total=num_classes, desc="digit capsules"):
        m = measure(real.astype(np.float64))
        spread = {name: max(float(np.std(v)), SPREAD_FLOOR.get(name, 0.0)) for name, v in m.items()}
        described.append(
            {
                "digit": k,
                "poses": len(poses),
                "spread": {n: round(v, 4) for n, v in spread.items()},
                "dims": describe(decoder, k, poses, spread, dominance, monotonic),
            }
        )
    counts: dict[str, int] = {}
    for c in described:
        for d in c["dims"]:
            counts[d["label"]] = counts.get(d["label"], 0) + 1
    return {
        "model_version": version,
        "deltas": DELTAS.tolist(),
        "measures": list(MEASURES),
        "units": UNITS,
        "rule": {"dominance": dominance, "monotonic": monotonic, **read},
        "method": __doc__.split("\n\n")[1].replace("\n", " "),
        "label_counts": dict(sorted(counts.items())),
        "digits": described,
    }


def main(argv: list[str] | None = None) -> None:
    log_to_console()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--data", default=MNIST_DIR, help="directory holding MNIST's IDX files")
    p.add_argument("--weights", default="weights", help="directory holding the ONNX files and model-card.json")
    p.add_argument("--per-class", type=int, default=200, help="test digits of each class whose poses are swept")
    p.add_argument("--dominance", type=float, default=1.5, help="how many times the next measure's effect the labelled one must have")
    p.add_argument("--monotonic", type=float, help=f"share of poses a sweep must move monotonically for a label (by network: {MONOTONIC})")
    p.add_argument("--network", choices=DECODERS, default="capsnet", help="capsnet: the MNIST network; multimnist: the two-digit one")
    p.add_argument("--pairs", type=int, default=2000, help="multimnist: how many of the 10,000 test pairs are read for the poses")
    p.add_argument("--out", default=None, help="where the atlas goes (default: --weights/" + " or ".join(ATLAS_FILES.values()) + ")")
    args = p.parse_args(argv)
    import onnxruntime as ort

    weights, data = Path(args.weights), Path(args.data)
    if args.network == "multimnist":
        version, read, classes = multimnist_classes(weights, data, args.per_class, args.pairs)
    else:
        version, read, classes = capsnet_classes(weights, data, args.per_class)
    decoder = ort.InferenceSession(str(weights / DECODERS[args.network]), providers=["CPUExecutionProvider"])
    num_classes = json.loads((weights / "model-card.json").read_text())["architecture"]["num_classes"]
    monotonic = args.monotonic if args.monotonic is not None else MONOTONIC[args.network]
    atlas = build(decoder, version, read, classes, num_classes, args.dominance, monotonic)
    Path(args.out or weights / ATLAS_FILES[args.network]).write_text(json.dumps(atlas, indent=1) + "\n")
    log.info("labels: %s", atlas["label_counts"])


if __name__ == "__main__":
    main()
