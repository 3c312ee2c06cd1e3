"""The is_digit rule: fitted on the calibration split, stated in the model card with what it does on the held-out
split, and computed by the service from the same outputs."""

from __future__ import annotations

import json

import numpy as np

from model.calibrate import DEFINITION, auc, capsule_outputs, fit, recon_error
from model.digit_rule import SIGNAL_NAMES, Scorer
from service.engine.card import load_card
from service.engine.local import load_engine
from tests.conftest import WEIGHTS


def test_the_service_computes_the_outputs_the_rule_was_fitted_on():
    rng = np.random.default_rng(0)
    images = (rng.random((6, 28, 28)) < 0.15).astype(np.float32)
    card = load_card(WEIGHTS)
    out = load_engine(WEIGHTS, card, "cpu", 1, "fp32").predict(images[:, None])
    lengths, errors, poses = capsule_outputs(WEIGHTS, "capsnet.onnx", images)
    np.testing.assert_allclose(lengths, out["lengths"], rtol=1e-5)
    np.testing.assert_allclose(errors, out["recon_errors"], rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(poses, out["poses"], rtol=1e-4, atol=1e-6)


def test_recon_error_is_relative_to_the_inputs_ink():
    x = np.zeros((2, 28, 28), np.float32)
    x[0, 4:24, 12:16] = 1.0  # 80 pixels of ink
    perfect, empty = x[:, None].copy(), np.zeros((2, 1, 28, 28), np.float32)
    assert recon_error(x, perfect)[0, 0] == 0.0 and recon_error(x, empty)[0, 0] == 1.0
    assert recon_error(x, perfect)[1, 0] == 0.0  # a blank input is not divided by zero


def test_auc_is_the_chance_a_positive_outscores_a_negative():
    assert auc(np.array([2.0, 3.0]), np.array([0.0, 1.0])) == 1.0
    assert auc(np.array([1.0, 1.0]), np.array([1.0, 1.0])) == 0.5  # ties count half
    assert auc(np.array([0.0, 3.0]), np.array([1.0, 2.0])) == 0.5


def test_the_fit_separates_what_it_is_shown():
    rng = np.random.default_rng(0)
    digits, others = rng.normal(1.0, 0.5, (400, 4)), rng.normal(-1.0, 0.5, (400, 4))
    params = fit(np.concatenate([digits, others]), np.r_[np.ones(400), np.zeros(400)].astype(np.float32), hidden=4)
    rule = {"mean": [0.0] * 4, "scale": [1.0] * 4, **{k: np.asarray(v).tolist() for k, v in params.items()}, "threshold": 0.0}
    scorer = Scorer.from_rule(rule)
    assert (scorer.score(digits) > 0).mean() > 0.97 and (scorer.score(others) < 0).mean() > 0.97


def test_the_committed_card_states_the_rule_and_what_it_does_on_the_held_out_split():
    section = json.loads((WEIGHTS / "model-card.json").read_text())["is_digit"]
    rule, report = section["rule"], section["calibration"]
    assert section["definition"] == DEFINITION and rule["signals"] == list(SIGNAL_NAMES)
    assert report["train_images"] >= 10000 and report["train_flagged"] <= 2 * report["quantile"]
    for figures in report["held_out"].values():  # every served file, on fonts, seeds and digits it was not fitted on
        sets = figures["sets"]
        assert figures["auc"] >= 0.98
        assert min(sets["glyphs_clean"]["flagged"], sets["glyphs_photo"]["flagged"]) >= 0.92
        assert sets["mnist"]["flagged"] <= 0.01 and sets["mnist_photo"]["flagged"] <= 0.02
        assert max(sets["mnist_8x8"]["flagged"], sets["mnist_lowres"]["flagged"]) <= 0.10
        assert min(sets["blank"]["blank"], sets["blank_jpeg"]["blank"]) >= 0.99
    assert load_card(WEIGHTS).digit_rule.threshold == rule["threshold"]
