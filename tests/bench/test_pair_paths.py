"""bench/pair_paths.py: lone digits and pairs through each path, and the card's figures for them held on a fresh,
seeded sample (a one-in-a-thousand bar from the sample's size: tests.conftest.fewest and most)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from bench import pair_paths
from model.pair_rule import PATHS
from tests.conftest import WEIGHTS, fewest, most
from tests.needs import need_mnist

N = 100  # lone digits, and as many pairs, per path


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """The committed network and rule on 100 + 100 test items per path, and the rule fitted again on as many training ones
    (in a copy of weights/, which --calibrate writes into)."""
    weights = tmp_path_factory.mktemp("pair-paths") / "weights"
    shutil.copytree(WEIGHTS, weights)
    return pair_paths.measure(weights, need_mnist(), N, calibrate=True), weights


def test_each_path_reads_as_the_card_says(measured) -> None:
    result, _ = measured
    card = json.loads((WEIGHTS / "model-card.json").read_text())["multimnist"]["second_digit"]["held_out"]
    for path in PATHS:
        got, want = result["card_rule"][path], card[path]
        assert got["lone"] == got["pairs"] == N
        assert got["lone_called_two"] * N <= most(want["lone_called_two"], N), path
        assert got["pairs_called_one"] * N <= most(want["pairs_called_one"], N), path
        assert round(got["pairs_both_named"] * N) >= fewest(want["pairs_both_named"], N), path
        assert round(got["lone_read_right"] * N) >= fewest(want["lone_read_right"], N), path


def test_calibrating_writes_a_rule_the_service_reads_with_its_held_out_figures(measured) -> None:
    from service.engine.card import load_card

    result, weights = measured
    second = load_card(weights).multimnist.second_digit
    assert second.pair_rule is not None and set(second.pair_rule.thresholds) == set(PATHS)
    assert second.held_out == result["fitted_rule"]
    assert all(0.0 <= v <= 1.0 for f in result["fitted_rule"].values() for k, v in f.items() if k not in ("lone", "pairs"))


def test_the_paths_draw_the_same_digits_as_the_network_sees_them() -> None:
    """One lone digit and one pair through each path land on the canvas where the pixels put them: each path's ink has its
    centre within 2.5 px of the pixels path's (each path centres and rescales by its own reading, within a pixel or two)."""
    x = (np.random.default_rng(0).random((2, 28, 28)) > 0.8).astype(np.uint8) * 255
    x[:, :4], x[:, -4:], x[:, :, :4], x[:, :, -4:] = 0, 0, 0, 0
    items = [
        {"digits": [0], "labels": [1], "shifts": np.zeros((1, 2), int)},
        {"digits": [0, 1], "labels": [1, 2], "shifts": np.array([[-2, 0], [2, 1]])},
    ]
    got = pair_paths.inputs(x, items, 23, 20)
    ys, xs = np.mgrid[:36, :36]

    def centre(ink: np.ndarray) -> np.ndarray:
        return np.array([(ys * ink).sum(), (xs * ink).sum()]) / ink.sum()

    for path in PATHS:
        assert got[path].shape == (2, 1, 36, 36) and got[path].max() > 0.5, path
        for item in range(2):
            off = centre(got[path][item, 0]) - centre(got["pixels"][item, 0])
            assert np.hypot(*off) <= 2.5, (path, item, off)


def test_pairs_written_apart_are_read_as_well_as_pairs_drawn_over_each_other(measured) -> None:
    """The held-out pairs written side by side, uploaded and drawn on the canvas, both named at floors set from the 400
    of BENCHMARKS.md (there as often as the same pairs drawn over each other), where the one-digit framing named both of
    0.5% and 3%."""
    result, _ = measured
    for path, at_least in (("upload", 0.9), ("canvas", 0.85)):
        got = result["apart"][path]
        assert got["pairs"] == N
        assert round(got["pairs_both_named"] * N) >= fewest(at_least, N), (path, got)


def test_the_same_items_traced_with_the_pen_are_read_as_pixels(measured) -> None:
    """The row that tells what tracing a digit's strokes costs: the held-out items made of their traced strokes and sent
    as pixels, read by the network (the page and the service left out)."""
    result, _ = measured
    traced, pixels = result["traced_pixels"], result["card_rule"]["pixels"]
    assert traced["lone"] == traced["pairs"] == N
    assert round(traced["pairs_two_longest_right"] * N) >= fewest(0.8, N)  # the committed network: 90% of 400 (BENCHMARKS.md)
    assert traced["pairs_two_longest_right"] <= pixels["pairs_two_longest_right"] + 0.1


def test_calibrating_writes_a_digits_rule_the_service_reads(measured) -> None:
    """The digits-at-all rule: in the card with its held-out figures, read by the service, turning away the real inputs
    of each path rarely and the non-digits far more often (100 + 100 real inputs a path, 50 of each non-digit set here)."""
    from service.engine.card import load_card

    result, weights = measured
    digits = load_card(weights).multimnist.digits
    assert digits is not None and set(digits.digits_rule.thresholds) == set(PATHS)
    held = result["fitted_digits"]
    assert json.loads((weights / "model-card.json").read_text())["multimnist"]["digits"]["held_out"] == held
    assert all(held["real_turned_away"][p] <= 0.1 for p in PATHS), held
    assert held["turned_away"]["noise"] >= 0.8 and held["turned_away"]["scribbles"] >= 0.5, held
