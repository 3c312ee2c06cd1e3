"""model/robustness.py and the table it committed to the model card."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from model.affine import Affine, warp
from model.robustness import CONDITIONS, main, transformed

ROOT = Path(__file__).resolve().parents[2]
CARD = json.loads((ROOT / "weights" / "model-card.json").read_text())


def test_signs_alternate_from_one_digit_to_the_next():
    x = np.random.default_rng(0).random((4, 28, 28), dtype=np.float32)
    out = transformed(x, "rotate", 30)
    np.testing.assert_allclose(out[0], warp(x[0], Affine(rotate=30)))
    np.testing.assert_allclose(out[1], warp(x[1], Affine(rotate=-30)))
    np.testing.assert_allclose(transformed(x, "none", 0), x)


def test_the_committed_table_covers_every_condition_for_both_networks():
    r = CARD["robustness"]
    assert r["test_digits"] == 10_000
    assert [(row["transform"], row["value"]) for row in r["accuracy"]] == [(k, float(v)) for k, v in CONDITIONS]
    clean = r["accuracy"][0]
    assert clean["capsnet"] == pytest.approx(CARD["test"]["accuracy"], abs=1e-4)  # the same file, the same 10k digits
    baseline = json.loads((ROOT / "weights" / "baseline-cnn.json").read_text())
    assert clean["baseline_cnn"] == pytest.approx(baseline["test_accuracy"], abs=1e-4)
    assert baseline["epochs"] == CARD["training"]["epochs"]  # the same budget of epochs
    assert (ROOT / "docs" / "robustness.png").stat().st_size > 10_000


def test_the_command_writes_the_section_and_the_plot(tmp_path):
    for name in ("capsnet.onnx", "model-card.json", "baseline-cnn.onnx", "baseline-cnn.json"):
        shutil.copy(ROOT / "weights" / name, tmp_path / name)
    main(["--weights", str(tmp_path), "--plot", str(tmp_path / "r.png"), "--limit", "40"])
    section = json.loads((tmp_path / "model-card.json").read_text())["robustness"]
    assert section["test_digits"] == 40 and len(section["accuracy"]) == len(CONDITIONS)
    assert (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"


def test_the_committed_table_is_what_the_files_do_on_a_sample():
    """Each condition of the card's table, both networks, measured again on the first 500 test digits: every count of
    digits read right inside the one-in-a-thousand binomial bounds of the card's rate for 500 (tests.conftest.fewest)."""
    from model.robustness import measure
    from tests.conftest import fewest
    from tests.needs import need_mnist

    n = 500
    again = measure(ROOT / "weights", str(need_mnist()), n)
    for row, card_row in zip(again["accuracy"], CARD["robustness"]["accuracy"], strict=True):
        for name in ("capsnet", "baseline_cnn"):
            right, p = round(row[name] * n), card_row[name]
            assert fewest(p, n) <= right <= n - fewest(1 - p, n), (row["transform"], row["value"], name, right, p)
