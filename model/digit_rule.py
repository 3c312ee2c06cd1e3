"""Whether an input is a digit at all, from what the capsules say of it: the rule the service applies to every /predict
and `python -m model.calibrate` fits. numpy only, so the service (which has no torch) runs the very code that was fitted.

Why more than a threshold: a capsule network always has a longest capsule, so a letter or a scribble gets some digit.
One length or one reconstruction error alone separates badly (a typed `A` is a long 4 that the 4's capsule redraws
fairly well). The capsules say more than one number, and the signals below are read together:

- lengths: the winner's length, its lead over the runner-up and the sum of the nine losers' lengths. A digit has one
  long capsule and nine short ones; a letter often has several half-long ones.
- redraw: how well the winner's capsule redraws the input from its own pose, against how well the best other capsule
  does (the paper's Figure 3; Frosst, Sabour & Hinton's DARCCC). What no capsule can redraw is no digit it knows.
- pose: the winner's 16 pose dimensions. A digit's capsule encodes stroke, width, skew in a range the training digits
  span; a letter that wins a capsule sits outside it (an `H` read as a 4 has a 4's length but no 4's pose).

A small network (one hidden layer of tanh units) scores the standardised signals; `is_digit` is score >= threshold.
It is fitted on MNIST training digits, their photographed, cropped and low-resolution forms, against letters, symbols,
scribbles and blank paper generated from fonts and seeds of the calibration split (model/honesty_sets.py), never on
test digits. When it says no, `why` names the group whose signals pull the score down the most: set to what a typical
training digit shows, that group alone would raise the score the most.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

# name -> (what the answer says, the signal columns it covers)
GROUPS: dict[str, tuple[str, slice]] = {
    "lengths": ("no capsule claims it clearly", slice(0, 4)),
    "redraw": ("no capsule can redraw it", slice(4, 7)),
    "pose": ("its pose is unlike any digit's", slice(7, 23)),
}
BLANK = ("blank", "no ink found")
SIGNAL_NAMES = (
    "winner_length",
    "minus_other_lengths",
    "length_lead",
    "minus_second_length",
    "minus_log_winner_error",
    "log_error_lead",
    "minus_log_min_error",
    *(f"winner_pose_{d}" for d in range(16)),
)
_EPS = 1e-3  # a perfect redraw's error is 0: its log is kept finite


def recon_error(images: np.ndarray, recon: np.ndarray) -> np.ndarray:
    """images [N,S,S], recon [N,K,S,S] -> [N,K]: sum of squared differences over the input's own sum of squares
    (floored at 1, a few pixels of ink), so the figure means the same for a thin 1 and a bold 8: 0 is a perfect
    redraw, 1 as far off as an empty image. The service's counterfactuals and the fitting both call this one."""
    ink = np.maximum(np.square(images).sum((-2, -1)), 1.0)
    return np.square(recon - images[:, None]).sum((-2, -1)) / ink[:, None]


def signals(lengths: np.ndarray, errors: np.ndarray, poses: np.ndarray) -> np.ndarray:
    """lengths [N,10], recon errors [N,10], poses [N,10,16] -> signals [N,23] (SIGNAL_NAMES), each larger for a digit."""
    n = len(lengths)
    rows = np.arange(n)
    order = np.argsort(-lengths, axis=1)
    ranked = lengths[rows[:, None], order]  # [N,10], longest first
    winner = order[:, 0]
    won = errors[rows, winner]
    others = errors.copy()
    others[rows, winner] = np.inf
    best_other = others.min(1)
    log_won = np.log(won + _EPS)
    # each column written into its place: the service judges one input at a time, where stacking and joining the
    # columns cost more than computing them
    out = np.empty((n, 7 + poses.shape[-1]), np.float32)  # SIGNAL_NAMES, for the network's 16 pose dimensions
    out[:, 0] = ranked[:, 0]
    out[:, 1] = -ranked[:, 1:].sum(1)
    out[:, 2] = ranked[:, 0] - ranked[:, 1]
    out[:, 3] = -ranked[:, 1]
    out[:, 4] = -log_won
    out[:, 5] = np.log(best_other + _EPS) - log_won
    out[:, 6] = -np.log(errors.min(1) + _EPS)
    out[:, 7:] = poses[rows, winner]
    return out


@dataclass(frozen=True)
class Scorer:
    """The fitted network: standardise with the training digits' mean and scale, tanh layer, linear read-out."""

    mean: np.ndarray  # [23]
    scale: np.ndarray  # [23]
    hidden_weight: np.ndarray  # [H,23]
    hidden_bias: np.ndarray  # [H]
    out_weight: np.ndarray  # [H]
    out_bias: float
    threshold: float

    @classmethod
    def from_rule(cls, rule: Mapping[str, Any]) -> Scorer:
        """The model card's `is_digit.rule` (its lists of figures) as the scorer it states."""
        arrays = {k: np.asarray(rule[k], np.float32) for k in ("mean", "scale", "hidden_weight", "hidden_bias", "out_weight")}
        return cls(**arrays, out_bias=float(rule["out_bias"]), threshold=float(rule["threshold"]))

    def score_standardised(self, z: np.ndarray) -> np.ndarray:
        return np.tanh(z @ self.hidden_weight.T + self.hidden_bias) @ self.out_weight + self.out_bias

    def score(self, s: np.ndarray) -> np.ndarray:
        """signals [N,23] -> [N]: >= threshold is a digit."""
        return self.score_standardised((s - self.mean) / self.scale)

    def why(self, s: np.ndarray) -> list[str]:
        """signals [N,23] -> the group (GROUPS) that, set to a typical digit's (0 after standardising), raises each
        score the most."""
        z = (s - self.mean) / self.scale
        base = self.score_standardised(z)
        gains = []
        for _, columns in GROUPS.values():
            typical = z.copy()
            typical[:, columns] = 0.0
            gains.append(self.score_standardised(typical) - base)
        names = list(GROUPS)
        return [names[i] for i in np.argmax(np.stack(gains, 1), 1)]


def judge(scorer: Scorer, blank_ink_below: float, images: np.ndarray, lengths: np.ndarray, errors: np.ndarray, poses: np.ndarray):
    """images [N,1,S,S] and the capsules' outputs -> (blank [N], is_digit [N], why [N]: None, or (group, phrase))."""
    blank = images.reshape(len(images), -1).sum(1) < blank_ink_below
    s = signals(lengths, errors, poses)
    digit = (scorer.score(s) >= scorer.threshold) & ~blank
    turned_away = np.flatnonzero(~digit & ~blank)  # only these need the answer of why (three more passes of the scorer)
    why: list[tuple[str, str] | None] = [BLANK if b else None for b in blank]
    for i, group in zip(turned_away, scorer.why(s[turned_away]) if len(turned_away) else []):
        why[i] = (group, GROUPS[group][0])
    return blank, digit, why


def auc(positive: np.ndarray, negative: np.ndarray) -> float | None:
    """P(a positive scores above a negative), ties counting half (Mann-Whitney); None when either side is empty."""
    if not len(positive) or not len(negative):
        return None
    scores = np.concatenate([positive, negative])
    ranks = np.empty(len(scores), np.float64)
    ranks[np.argsort(scores, kind="mergesort")] = np.arange(1, len(scores) + 1)
    _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    ranks = (np.bincount(inverse, weights=ranks) / counts)[inverse]  # ties share their mean rank
    n1, n0 = len(positive), len(negative)
    return float((ranks[:n1].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))
