"""model/pair_rule.py: one digit or two, from the two-digit network's capsules and redrawings, a threshold per path; and
which two capsules a pair is."""

from __future__ import annotations

import numpy as np
import pytest

from model.pair_rule import (
    CANDIDATES,
    CHOICE_SIGNAL_NAMES,
    DIGITS_SIGNAL_NAMES,
    PATHS,
    SIGNAL_NAMES,
    PairChoice,
    PairRule,
    choice_signals,
    choose_thresholds,
    digits_signals,
    fit,
    fit_choice,
    fit_hidden,
    floors,
    mistakes,
    signals,
)


def test_signals_read_what_the_second_redrawing_adds() -> None:
    side = 8
    one, other = np.zeros((side, side), np.float32), np.zeros((side, side), np.float32)
    one[:, 1], other[:, 6] = 1.0, 1.0  # two strokes apart
    pair = np.minimum(one + other, 1.0)[None, None]
    lengths = np.tile(np.array([[0.9, 0.8, 0.1, 0.05, 0, 0, 0, 0, 0, 0]], np.float32), (2, 1))
    images = np.concatenate([pair, one[None, None]])
    recon = np.stack([np.stack([one, other])[:, None], np.stack([one, one])[:, None]])  # [2,2,1,S,S]
    s = signals(lengths, recon, images)
    assert s.shape == (2, len(SIGNAL_NAMES))
    np.testing.assert_allclose(s[:, :4], [[0.9, 0.8, 0.1, 0.05]] * 2)
    assert s[0, 4] == pytest.approx(0.5) and s[0, 5] == pytest.approx(0.5)  # the pair: half explained by each redrawing
    assert s[1, 4] == pytest.approx(1.0) and s[1, 5] == pytest.approx(0.0)  # the lone stroke: the second adds nothing


def test_a_fitted_rule_keeps_each_paths_worse_mistake_low_with_its_own_threshold() -> None:
    rng = np.random.default_rng(0)

    def path(shift: float, n: int = 400) -> tuple[np.ndarray, np.ndarray]:
        two = np.arange(n) >= n // 2
        s = rng.normal(0.0, 1.0, (n, len(SIGNAL_NAMES))) + np.where(two, 2.0, 0.0)[:, None] * np.r_[0, 1, 0, 0, 0, 1] + shift
        return s.astype(np.float32), two

    paths = {"pixels": path(0.0), "upload": path(0.0), "canvas": path(0.8)}  # the canvas scores run higher for both
    rule = choose_thresholds(fit(np.concatenate([s for s, _ in paths.values()]), np.concatenate([t for _, t in paths.values()])), paths)
    assert set(rule.thresholds) == set(PATHS)
    assert rule.at("canvas") > rule.at("pixels")
    for name, (s, two) in paths.items():
        assert max(mistakes(rule, s, two, rule.at(name))) < 0.12, name
        assert (rule.two(s, name) == two).mean() > 0.88, name  # read by the path's own threshold
    canvas, two = paths["canvas"]
    assert max(mistakes(rule, canvas, two, rule.at("pixels"))) > max(mistakes(rule, canvas, two, rule.at("canvas")))
    again = PairRule.from_card(rule.as_card())
    np.testing.assert_array_equal(again.two(paths["canvas"][0], "canvas"), rule.two(paths["canvas"][0], "canvas"))
    assert again.at(None) == pytest.approx(rule.threshold, abs=1e-6)


def test_a_rule_fitted_on_other_signals_is_refused() -> None:
    card = PairRule(np.zeros(len(SIGNAL_NAMES)), np.ones(len(SIGNAL_NAMES)), np.ones(len(SIGNAL_NAMES)), 0.0, 0.0).as_card()
    card["signals"] = ["second_length"]
    with pytest.raises(ValueError, match="other signals"):
        PairRule.from_card(card)


def test_the_digits_rule_turns_away_its_share_of_real_inputs_on_each_path() -> None:
    """Fitted on real inputs against non-digits, each path's floor turns away the share asked of its real inputs; it
    travels through the card with the signals it reads, and a card rule of the other kind is refused."""
    rng = np.random.default_rng(1)
    k = len(DIGITS_SIGNAL_NAMES)
    real = {p: (rng.normal(0.0, 1.0, (500, k)) + 2.0 + shift).astype(np.float32) for p, shift in zip(PATHS, (0.0, 0.0, 0.5))}
    none = rng.normal(0.0, 1.0, (600, k)).astype(np.float32)
    s = np.concatenate([*real.values(), none])
    rule = floors(fit(s, np.arange(len(s)) < 1500, names=DIGITS_SIGNAL_NAMES), real, 0.02)
    for p, x in real.items():
        assert np.mean(rule.score(x) < rule.at(p)) == pytest.approx(0.02, abs=0.005), p
    assert np.mean(rule.score(none) < rule.at("upload")) > 0.9
    card = rule.as_card()
    assert card["signals"] == list(DIGITS_SIGNAL_NAMES)
    again = PairRule.from_card(card, DIGITS_SIGNAL_NAMES)
    np.testing.assert_allclose(again.score(none), rule.score(none), atol=1e-4)  # the card keeps six decimals
    with pytest.raises(ValueError, match="other signals"):
        PairRule.from_card(card)  # read as the one-or-two rule


def test_digits_signals_add_what_the_six_shortest_capsules_claim_and_the_longest_ones_pose() -> None:
    lengths = np.array([[0.1, 0.8, 0.1, 0.05, 0.1, 0.9, 0.1, 0.1, 0.1, 0.1]], np.float32)
    poses = np.arange(160, dtype=np.float32).reshape(1, 10, 16)  # capsule k's pose is 16k .. 16k+15
    images = np.zeros((1, 1, 4, 4), np.float32)
    recon = np.zeros((1, 2, 1, 4, 4), np.float32)
    s = digits_signals(lengths, poses, recon, images)
    assert s.shape == (1, len(DIGITS_SIGNAL_NAMES))
    np.testing.assert_allclose(s[:, : len(SIGNAL_NAMES)], signals(lengths, recon, images))
    assert s[0, len(SIGNAL_NAMES)] == pytest.approx(0.55)  # the six shortest: five 0.1 and the 0.05
    np.testing.assert_array_equal(s[0, len(SIGNAL_NAMES) + 1 :], poses[0, 5])  # the longest capsule's


def test_the_hidden_layer_tells_a_ring_from_its_centre_where_a_weighted_sum_cannot() -> None:
    """Real inputs inside a ring of non-digits, in two of the signals: no one weighted sum separates them, the tanh
    layer does; the fitted rule travels through the card with its layer and scores the same."""
    rng = np.random.default_rng(3)
    k = len(DIGITS_SIGNAL_NAMES)
    real = rng.normal(0.0, 0.5, (800, k))
    angle = rng.uniform(0.0, 2 * np.pi, 800)
    none = rng.normal(0.0, 0.5, (800, k))
    none[:, 0], none[:, 1] = 3.0 * np.cos(angle), 3.0 * np.sin(angle)
    s = np.concatenate([real, none]).astype(np.float32)
    is_real = np.arange(len(s)) < len(real)

    def none_turned_away(rule: PairRule) -> float:
        ruled = floors(rule, {"pixels": real}, 0.01)
        return float(np.mean(ruled.score(none) < ruled.at("pixels")))

    hidden = fit_hidden(s, is_real, DIGITS_SIGNAL_NAMES)
    assert none_turned_away(fit(s, is_real, names=DIGITS_SIGNAL_NAMES)) < 0.3
    assert none_turned_away(hidden) > 0.95
    card = hidden.as_card()
    assert len(card["hidden_weight"]) == 8 and len(card["hidden_weight"][0]) == k
    np.testing.assert_allclose(PairRule.from_card(card, DIGITS_SIGNAL_NAMES).score(s), hidden.score(s), atol=1e-3)
    np.testing.assert_array_equal(fit_hidden(s, is_real, DIGITS_SIGNAL_NAMES).score(s), hidden.score(s))  # seeded


def test_a_card_rule_of_the_wrong_shape_is_refused_when_read_not_at_the_first_request() -> None:
    k = len(DIGITS_SIGNAL_NAMES)
    rng = np.random.default_rng(4)
    s = rng.normal(0.0, 1.0, (200, k)).astype(np.float32)
    card = fit_hidden(s, np.arange(200) < 100, DIGITS_SIGNAL_NAMES, steps=10).as_card()
    PairRule.from_card(card, DIGITS_SIGNAL_NAMES)
    for broken in (
        {k2: v for k2, v in card.items() if k2 != "hidden_bias"},  # half a layer
        {**card, "hidden_weight": [row[:-1] for row in card["hidden_weight"]]},  # a signal short
        {**card, "weight": card["weight"][:-1]},  # a unit short
        {**card, "mean": card["mean"][:-1]},
    ):
        with pytest.raises(ValueError, match="wrong shape"):
            PairRule.from_card(broken, DIGITS_SIGNAL_NAMES)


def test_choice_signals_tell_which_pair_of_redrawings_explains_the_input() -> None:
    """Strokes at columns 1 and 6 drawn; the longest capsule redraws column 1, the second a stroke that is not there,
    the third column 6: the pair (0, 2) explains all the ink, (0, 1) misses half and draws where there is none."""
    side = 8
    cols = [np.zeros((side, side), np.float32) for _ in range(3)]
    cols[0][:, 1], cols[1][:, 4], cols[2][:, 6] = 1.0, 1.0, 1.0
    image = np.minimum(cols[0] + cols[2], 1.0)[None, None]
    lengths = np.array([[0.9, 0.7, 0.6, 0.1, 0, 0, 0, 0, 0, 0]], np.float32)
    s = choice_signals(lengths, np.stack(cols)[None, :, None], image)
    assert s.shape == (1, len(CHOICE_SIGNAL_NAMES))
    read = dict(zip(CHOICE_SIGNAL_NAMES, s[0]))
    assert read["02_unexplained"] == pytest.approx(0.0) and read["02_misses"] == pytest.approx(0.0)
    assert read["01_misses"] == pytest.approx(0.5) and read["01_overdraws"] == pytest.approx(0.5)
    assert (read["12_first_length"], read["12_second_length"]) == pytest.approx((0.7, 0.6))


def test_a_fitted_choice_picks_the_pair_that_explains_the_input() -> None:
    """Synthetic pairs whose right candidate is the one with the least unexplained ink, lengths alone saying nothing:
    the fitted read-out picks it, and reads back from the card the same."""
    rng = np.random.default_rng(0)
    n = 3000
    s = rng.normal(size=(n, len(CHOICE_SIGNAL_NAMES))).astype(np.float32)
    unexplained = [CHOICE_SIGNAL_NAMES.index(f"{a}{b}_unexplained") for a, b in CANDIDATES]
    truth = s[:, unexplained].argmin(1)
    right = np.eye(len(CANDIDATES), dtype=bool)[truth]
    right[:50] = False  # pairs no candidate names: left out of the fit
    choice = fit_choice(s, right)
    test = rng.normal(size=(1000, len(CHOICE_SIGNAL_NAMES))).astype(np.float32)
    assert (choice.pick(test) == test[:, unexplained].argmin(1)).mean() > 0.9
    again = PairChoice.from_card(choice.as_card())
    np.testing.assert_array_equal(again.pick(test), choice.pick(test))
    assert again.ranks(test[:1]).tolist()[0] in [list(c) for c in CANDIDATES]


def test_a_choice_fitted_on_other_signals_is_refused() -> None:
    card = fit_choice(
        np.random.default_rng(1).normal(size=(300, len(CHOICE_SIGNAL_NAMES))), np.eye(3, dtype=bool)[np.arange(300) % 3]
    ).as_card()
    with pytest.raises(ValueError, match="other signals"):
        PairChoice.from_card({**card, "signals": card["signals"][:-1]})
    with pytest.raises(ValueError, match="wrong shape"):
        PairChoice.from_card({**card, "bias": card["bias"][:2]})
