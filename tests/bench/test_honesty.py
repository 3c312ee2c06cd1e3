"""bench.honesty: its AUC is the Mann-Whitney statistic, and a small run goes through the service's own preprocessing,
engine and rule end to end, writing every figure the report reads."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bench import honesty
from model import honesty_sets as hs
from tests.conftest import MNIST, WEIGHTS, fewest, most
from tests.needs import need_mnist


def _pairwise(pos: np.ndarray, neg: np.ndarray) -> float:
    return float(np.mean([(p > n) + 0.5 * (p == n) for p in pos for n in neg]))


def test_auc_counts_pairs_and_ties():
    rng = np.random.default_rng(0)
    pos, neg = rng.integers(0, 6, 40).astype(float), rng.integers(0, 5, 30).astype(float)
    assert honesty.auc(pos, neg) == pytest.approx(_pairwise(pos, neg))
    assert honesty.auc(np.array([2.0, 3.0]), np.array([0.0, 1.0])) == 1.0
    assert honesty.auc(np.array([1.0]), np.array([1.0])) == 0.5
    assert honesty.auc(np.array([]), np.array([1.0])) is None


def test_a_small_run_answers_every_set_and_signal(tmp_path):
    need_mnist()
    names = [n for n in hs.SETS if not n.startswith("glyphs") or hs.fonts_for("held_out")]
    args = ["--scale", "0.01", "--sets", *names, "--data", str(MNIST), "--weights", str(WEIGHTS), "--results", str(tmp_path)]
    honesty.main([*args, "--save-inputs", str(tmp_path / "inputs.npz")])
    result = json.loads((tmp_path / "honesty.json").read_text())
    assert [r["set"] for r in result["sets"]] == names
    for r in result["sets"]:
        assert r["n"] >= 1 and 0 <= r["blank"] <= 1 and 0 <= r["is_digit_false"] <= 1
        assert ("accuracy" in r) == (hs.SETS[r["set"]].kind == "digit")
    assert set(result["signals"]) == set(honesty.SIGNALS)
    mnist = next(r for r in result["sets"] if r["set"] == "mnist")
    assert mnist["accuracy"] >= 0.9 and mnist["blank"] == 0
    # the card's held-out figures for the file served (INT8 on the CPU), held on this small fresh sample with a
    # one-in-a-thousand bar from each set's size (tests.conftest.fewest and most)
    card = json.loads((WEIGHTS / "model-card.json").read_text())["is_digit"]["calibration"]["held_out"][result["model"]["file"]]
    for r in result["sets"]:
        want, n = card["sets"][r["set"]], r["n"]
        kind = hs.SETS[r["set"]].kind
        if kind == "blank":
            assert round(r["blank"] * n) >= fewest(want["blank"], n), r
        elif kind == "digit":
            assert round(r["flagged"] * n) <= most(want["flagged"], n), r
        else:
            assert round(r["flagged"] * n) >= fewest(want["flagged"], n), r
    saved = np.load(tmp_path / "inputs.npz")
    assert saved["mnist/inputs"].shape[1:] == (28, 28) and saved["mnist/labels"].dtype == np.uint8
