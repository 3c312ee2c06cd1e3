"""The dimension atlas: its measures measure what they say, and its committed labels hold on poses it never saw."""

from __future__ import annotations

import json

import numpy as np
import pytest

from model.atlas import DELTAS, measure, monotonic_share, pair_poses, sweep
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


def test_a_pair_digit_is_measured_only_where_the_network_finds_it():
    """The two-digit atlas sweeps capsule k's pose only on pairs holding k where k is among the two longest capsules:
    elsewhere that pose describes nothing the network saw."""
    lengths = np.full((3, 10), 0.01)
    lengths[0, [3, 5]] = 0.9  # holds 3 and 5: found
    lengths[1, [3, 7]] = 0.9  # holds 3 and 1: the 3 found, the 1 missed
    lengths[2, [2, 4]] = 0.9  # holds 3 and 4: the 3 missed
    poses = np.arange(3 * 10 * 16, dtype=np.float32).reshape(3, 10, 16)
    labels = np.array([[5, 3], [3, 1], [4, 3]])
    found, where = pair_poses(lengths, poses, labels, 3)
    assert where.tolist() == [[0, 1], [1, 0]]
    assert np.array_equal(found, poses[[0, 1], 3])
    assert len(pair_poses(lengths, poses, labels, 1)[0]) == 0


def failing_labels(atlas: dict, decoder, fresh) -> tuple[int, list]:
    """Each labelled dimension swept on poses the atlas did not use (`fresh(k)`: capsule k's); those moving their
    measure monotonically in the recorded direction for under 60% of them."""
    failures, checked = [], 0
    for c in atlas["digits"]:
        k = c["digit"]
        poses = fresh(k)
        for d in c["dims"]:
            if d["label"] == "local":
                continue
            checked += 1
            share = monotonic_share(measure(sweep(decoder, k, poses, d["dim"]).astype(np.float64))[d["label"]], d["direction"])
            if share < 0.6:
                failures.append((k, d["dim"], d["label"], round(share, 2)))
    return checked, failures


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
    used = atlas["rule"]["poses_per_digit"]

    def fresh(k: int) -> np.ndarray:
        own = (images[labels == k] / np.float32(255.0)).astype(np.float32)
        lengths, poses = capsnet.run(["lengths", "poses"], {"image": own[:, None]})
        found = poses[lengths.argmax(1) == k, k][used : used + 60]
        assert len(found) == 60, f"only {len(found)} fresh poses of digit {k}"
        return found

    checked, failures = failing_labels(atlas, decoder, fresh)
    assert checked >= 40, f"only {checked} labelled dimensions"
    assert not failures, f"labels that do not hold on fresh poses (digit, dim, label, share monotonic): {failures}"


def test_the_two_digit_networks_labels_hold_on_pairs_the_atlas_did_not_use():
    """The same for the two-digit network's atlas (section 7's sliders): each label holds on capsule k's poses from the
    next test pairs holding k, where the network finds it, after the ones the atlas was measured on; and on pairs it
    never read, as the service hands a drawing or an upload to the network (rescaled and centred), where a slider moves
    a pose on the page."""
    import onnxruntime as ort
    import torch

    from model.data import load_mnist
    from model.multimnist import SERVED_BOX, Pairs, as_served, fixed_test_pairs

    need_mnist()
    atlas = json.loads((WEIGHTS / "multimnist-dimensions.json").read_text())
    card = json.loads((WEIGHTS / "model-card.json").read_text())["multimnist"]
    assert atlas["model_version"] == card["version"] and atlas["deltas"] == DELTAS.tolist()
    net = ort.InferenceSession(str(WEIGHTS / "multimnist.onnx"), providers=["CPUExecutionProvider"])
    decoder = ort.InferenceSession(str(WEIGHTS / "multimnist-decoder.onnx"), providers=["CPUExecutionProvider"])
    images, labels = load_mnist(MNIST, "test")
    x = torch.from_numpy((images / np.float32(255.0)).astype(np.float32)[:, None])
    pairs, read = fixed_test_pairs(x, torch.from_numpy(labels.astype(np.int64))), atlas["rule"]["test_pairs"]
    lengths, poses = net.run(["lengths", "poses"], {"image": pairs.image[:read].numpy()})
    used = atlas["rule"]["poses_per_digit"]

    unread = Pairs(*(t[read : 2 * read] for t in (pairs.image, pairs.digits, pairs.labels)))
    served = as_served(unread, torch.full((read,), float(SERVED_BOX)))
    served_lengths, served_poses = net.run(["lengths", "poses"], {"image": served.image.numpy()})

    def fresh(k: int) -> np.ndarray:
        found = pair_poses(lengths, poses, pairs.labels[:read].numpy(), k)[0][used : used + 60]
        assert len(found) >= 40, f"only {len(found)} fresh poses of capsule {k}"
        return found

    def as_the_service_sends_them(k: int) -> np.ndarray:
        found = pair_poses(served_lengths, served_poses, served.labels.numpy(), k)[0][:60]
        assert len(found) >= 40, f"only {len(found)} poses of capsule {k} in pairs as the service sends them"
        return found

    for poses_of in (fresh, as_the_service_sends_them):
        checked, failures = failing_labels(atlas, decoder, poses_of)
        assert checked >= 40, f"only {checked} labelled dimensions"
        assert not failures, f"labels that do not hold on {poses_of.__name__} poses (digit, dim, label, share monotonic): {failures}"
