"""The is_digit rule's signals and its answer of why: what a reader of /predict's `why_not_digit` relies on."""

from __future__ import annotations

import numpy as np

from model.digit_rule import BLANK, GROUPS, SIGNAL_NAMES, Scorer, judge, signals


def _outputs(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    lengths = rng.uniform(0.0, 0.3, (n, 10)).astype(np.float32)
    lengths[np.arange(n), rng.integers(0, 10, n)] = 0.95
    return lengths, rng.uniform(0.1, 0.9, (n, 10)).astype(np.float32), rng.normal(0, 0.2, (n, 10, 16)).astype(np.float32)


def test_signals_are_larger_for_one_clear_winner_that_redraws_well():
    rng = np.random.default_rng(0)
    lengths, errors, poses = _outputs(2, rng)
    lengths[1] = 0.6  # ten half-long capsules: nobody's digit
    errors[0, lengths[0].argmax()] = 0.05  # the winner redraws the input almost perfectly
    s = signals(lengths, errors, poses)
    assert s.shape == (2, len(SIGNAL_NAMES))
    named = dict(zip(SIGNAL_NAMES, s.T))
    assert named["length_lead"][0] > named["length_lead"][1] and named["minus_other_lengths"][0] > named["minus_other_lengths"][1]
    assert named["minus_log_winner_error"][0] > named["minus_log_winner_error"][1]
    np.testing.assert_array_equal(s[:, 7:], poses[np.arange(2), lengths.argmax(1)])  # the winner's own pose


def _scorer_weighing(group: str) -> Scorer:
    """A scorer that reads one group of signals only (each column the same weight), for checking the answer of why."""
    columns = GROUPS[group][1]
    hidden = np.zeros((1, len(SIGNAL_NAMES)), np.float32)
    hidden[0, columns] = 1.0
    ones = np.ones(len(SIGNAL_NAMES), np.float32)
    return Scorer(ones * 0, ones, hidden, np.zeros(1, np.float32), np.ones(1, np.float32), 0.0, threshold=-0.5)


def test_why_names_the_group_that_pulls_the_score_down():
    rng = np.random.default_rng(1)
    lengths, errors, poses = _outputs(3, rng)
    images = np.ones((3, 1, 28, 28), np.float32)
    poses[:, :, :] = -3.0  # far from any digit's pose (standardised to 0 here)
    blank, digit, why = judge(_scorer_weighing("pose"), 1.0, images, lengths, errors, poses)
    assert not blank.any() and not digit.any()
    assert why == [("pose", GROUPS["pose"][0])] * 3


def test_blank_input_is_blank_whatever_the_capsules_say():
    rng = np.random.default_rng(2)
    lengths, errors, poses = _outputs(2, rng)
    images = np.zeros((2, 1, 28, 28), np.float32)
    images[1, 0, 10:20, 14] = 1.0
    blank, digit, why = judge(_scorer_weighing("lengths"), 1.0, images, lengths, errors, poses)
    assert blank.tolist() == [True, False] and not digit[0] and why[0] == BLANK
