"""The is_digit rule: calibrated on MNIST, stated in the model card, computed the same way by the service."""

from __future__ import annotations

import json

import numpy as np

from model.calibrate import DEFINITION, features, flagged, recon_error
from service.engine.card import load_card
from service.engine.local import load_engine
from tests.conftest import WEIGHTS


def test_the_service_computes_the_errors_the_rule_was_calibrated_on():
    rng = np.random.default_rng(0)
    images = (rng.random((6, 28, 28)) < 0.15).astype(np.float32)
    card = load_card(WEIGHTS)
    engine = load_engine(WEIGHTS, card, "cpu", 1, "fp32")
    out = engine.predict(images[:, None])
    lengths, errors = features(WEIGHTS, "capsnet.onnx", images)
    win = out["lengths"].argmax(1)
    np.testing.assert_allclose(lengths, out["lengths"][np.arange(6), win], rtol=1e-5)
    np.testing.assert_allclose(errors, out["recon_errors"][np.arange(6), win], rtol=1e-4)


def test_recon_error_is_relative_to_the_inputs_ink():
    x = np.zeros((2, 28, 28), np.float32)
    x[0, 4:24, 12:16] = 1.0  # 80 pixels of ink
    perfect, empty = x[:, None].copy(), np.zeros((2, 1, 28, 28), np.float32)
    assert recon_error(x, perfect)[0, 0] == 0.0 and recon_error(x, empty)[0, 0] == 1.0
    assert recon_error(x, perfect)[1, 0] == 0.0  # a blank input is not divided by zero


def test_flagged_when_short_or_badly_redrawn():
    rule = {"min_length": 0.7, "max_recon_error": 0.5}
    got = flagged(np.array([0.9, 0.6, 0.9]), np.array([0.2, 0.2, 0.6]), rule)
    assert got.tolist() == [False, True, True]


def test_the_committed_card_states_the_rule_and_its_figures():
    section = json.loads((WEIGHTS / "model-card.json").read_text())["is_digit"]
    rule, report = section["rule"], section["calibration"]
    assert section["definition"] == DEFINITION
    assert 0 < rule["min_length"] < 1 and 0 < rule["max_recon_error"] < 1 and rule["blank_ink_below"] > 0
    assert report["train_images"] >= 10000 and 0 < report["train_flagged"] <= 2 * report["quantile"]
    for figures in report["test"].values():  # every served file flags at most 2% of the MNIST test set
        assert figures["flagged"] <= 0.02 and len(figures["flagged_per_class"]) == 10
    assert load_card(WEIGHTS).digit_rule.max_recon_error == rule["max_recon_error"]
