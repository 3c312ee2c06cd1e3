"""The dimension atlas: its measures measure what they say, and its committed labels hold on poses it never saw."""

from __future__ import annotations

import json

import numpy as np
import pytest

from model.atlas import DELTAS, measure, monotonic_share, sweep
from tests.conftest import MNIST, WEIGHTS
from tests.needs import need_mnist


def bar(rows: slice, cols: slice, size: int = 28) -> np.ndarray:
    img = np.zeros((size, size))
    img[rows, cols] = 1.0
    return img


def test_measures_of_simple_strokes():
    upright, wide, moved = bar(slice(4, 24), slice(12, 15)), bar(slice(4, 24), slice(10, 18)), bar(slice(4, 24), slice(16, 19))
    m = {k: measure(np.stack([upright, wide, moved]))[k] for k in ("ink", "thickness", "width", "height", "x", "y")}
    assert m["ink"].tolist() == [60.0, 160.0, 60.0]
    assert m["width"][1] > m["width"][0] and abs(m["height"][0] - m["height"][1]) < 1e-9
    assert m["thickness"][1] > m["thickness"][0]
    assert m["x"][2] - m["x"][0] == pytest.approx(4.0) and m["y"][2] == pytest.approx(m["y"][0])
    leaning = np.zeros((28, 28))
    for r in range(4, 24):  # the top further right than the bottom: a stroke leaning right
        leaning[r, 14 + (24 - r) // 3] = 1.0
    assert measure(leaning)["slant"] > 10 and abs(measure(upright)["slant"]) < 1e-6


def test_monotonic_share_allows_noise_but_not_reversals():
    rows = np.array([[0, 1, 2, 3], [0, 1, 0.995, 3], [0, 2, 1, 3], [3, 2, 1, 0]], float)
    assert monotonic_share(rows, 1) == 0.5 and monotonic_share(rows, -1) == 0.25


def test_committed_labels_hold_on_poses_the_atlas_did_not_use():
    """A dimension labelled `width` must change the reconstructions' width monotonically, in the recorded direction,
    for most test poses of that class: checked on the test digits after the ones the atlas was measured on."""
    import onnxruntime as ort

    from model.data import load_mnist

    need_mnist()
    atlas = json.loads((WEIGHTS / "dimensions.json").read_text())
    assert atlas["deltas"] == DELTAS.tolist()
    capsnet = ort.InferenceSession(str(WEIGHTS / "capsnet.onnx"), providers=["CPUExecutionProvider"])
    decoder = ort.InferenceSession(str(WEIGHTS / "decoder.onnx"), providers=["CPUExecutionProvider"])
    images, labels = load_mnist(MNIST, "test")
    used, failures, checked = atlas["rule"]["poses_per_digit"], [], 0
    for c in atlas["digits"]:
        k = c["digit"]
        own = (images[labels == k] / np.float32(255.0)).astype(np.float32)
        lengths, poses = capsnet.run(["lengths", "poses"], {"image": own[:, None]})
        fresh = poses[lengths.argmax(1) == k, k][used : used + 60]
        for d in c["dims"]:
            if d["label"] == "local":
                continue
            checked += 1
            share = monotonic_share(measure(sweep(decoder, k, fresh, d["dim"]).astype(np.float64))[d["label"]], d["direction"])
            if share < 0.6:
                failures.append((k, d["dim"], d["label"], round(share, 2)))
    assert checked >= 40, f"only {checked} labelled dimensions"
    assert not failures, f"labels that do not hold on fresh poses (digit, dim, label, share monotonic): {failures}"
