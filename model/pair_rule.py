"""One digit or two: the rule the service applies to every two-digit answer and `python -m bench.pair_paths --calibrate`
fits. numpy only, so the service (which has no torch) runs the very code that was fitted.

Why more than the second capsule's length: the two-digit network always has a second-longest capsule, and for a lone
digit that arrives larger than training drew lone digits (an upload or a drawing is scaled to fill the canvas), it is
often half long. What tells a second digit apart is read together:

- lengths: the four longest capsules (a second digit has a long second and a short third; the fourth tells a short
  third that is the network's doubt about one digit from one that is a third's leftover beside two);
- redraw: how much of the input the longest capsule's redrawing explains, and how much the second's adds to it. A lone
  digit is explained by the first alone; a second digit's ink is there only in the second redrawing.

(How well the second redrawing alone explains the input, how much the two redrawings overlap, the amount of ink, and a
read-out fitted for each path apart were tried beside these and changed no figure by more than the sets' noise; the
fourth length lowered the sum of the three paths' worse mistakes by 1.3, 1.3 and 0.4 points in three shuffles of a
5-fold cross-validation on the calibration digits, the canvas's most: 0.4-0.8.)

A logistic read-out scores the standardised signals; two digits where score >= threshold. It is fitted on training
digits, alone and in pairs, as they arrive through each of the service's paths (PATHS: JSON pixels, uploaded pictures,
the page's canvas), and each path has its own threshold, the one that keeps the worse of its two mistakes lowest: a
drawing on the canvas is not a photo, and the same score does not mean the same on both.

The same read-out, on those signals and what the six shortest capsules claim together (DIGITS_SIGNAL_NAMES), tells
whether an input holds digits at all: fitted on real inputs of every path against the letters, symbols and scribbles of
the one-digit network's `is_digit` sets and noise, each path's threshold (`floors`) turns away a set share of its real
inputs. The network always has two longest capsules; what it reads in a letter is no digit, and the service says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

SIGNAL_NAMES = ("first_length", "second_length", "third_length", "fourth_length", "first_explains", "second_adds")
# whether the input holds digits at all: the same, and what the six shortest capsules claim together (a letter or a
# scribble leaves several capsules half long where digits leave them short)
DIGITS_SIGNAL_NAMES = (*SIGNAL_NAMES, "rest_length")
PATHS = ("pixels", "upload", "canvas")  # how an input reached the network: JSON pixels, a picture, the page's drawing


def signals(lengths: np.ndarray, reconstructions: np.ndarray, images: np.ndarray) -> np.ndarray:
    """lengths [N,10], the two longest capsules' redrawings [N,2,1,S,S] (longest first), inputs [N,1,S,S] -> [N,6]."""
    ranked = -np.sort(-lengths, axis=1)[:, :4]
    x = images.reshape(len(images), -1).astype(np.float64)
    r = reconstructions.reshape(len(images), 2, -1).astype(np.float64)
    ink = np.maximum(np.square(x).sum(1), 1.0)  # a few pixels of ink at least: a speck's ratios stay finite
    alone = np.square(x - r[:, 0]).sum(1) / ink
    both = np.square(x - np.minimum(r[:, 0] + r[:, 1], 1.0)).sum(1) / ink
    return np.concatenate([ranked, np.stack([1.0 - alone, alone - both], 1)], 1).astype(np.float32)


def digits_signals(lengths: np.ndarray, reconstructions: np.ndarray, images: np.ndarray) -> np.ndarray:
    """`signals`, then the six shortest capsules' summed length -> [N,7] (DIGITS_SIGNAL_NAMES)."""
    return with_rest(signals(lengths, reconstructions, images), lengths)


def with_rest(s: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """`signals` already computed [N,6] and the lengths [N,10] -> DIGITS_SIGNAL_NAMES [N,7], for a caller that reads both
    rules of one input."""
    rest = -np.sort(-lengths, axis=1)[:, 4:].sum(1, keepdims=True)
    return np.concatenate([s, rest], 1).astype(np.float32)


@dataclass(frozen=True)
class PairRule:
    mean: np.ndarray  # [6]
    scale: np.ndarray  # [6]
    weight: np.ndarray  # [6]
    bias: float
    threshold: float  # for a path without one of its own
    thresholds: Mapping[str, float] = field(default_factory=dict)  # path -> its threshold
    names: tuple[str, ...] = SIGNAL_NAMES  # the signals it reads: SIGNAL_NAMES (one digit or two), DIGITS_SIGNAL_NAMES

    @classmethod
    def from_card(cls, rule: Mapping[str, Any], names: tuple[str, ...] = SIGNAL_NAMES) -> PairRule:
        """The card's rule, which must have been fitted on `names` as this module computes them."""
        if tuple(rule["signals"]) != names:
            raise ValueError("the card's pair rule was fitted on other signals than model/pair_rule.py computes")
        arrays = {k: np.asarray(rule[k], np.float64) for k in ("mean", "scale", "weight")}
        thresholds = {k: float(v) for k, v in rule.get("thresholds", {}).items()}
        return cls(**arrays, bias=float(rule["bias"]), threshold=float(rule["threshold"]), thresholds=thresholds, names=names)

    def as_card(self) -> dict[str, Any]:
        return {
            "signals": list(self.names),
            "mean": [round(float(v), 6) for v in self.mean],
            "scale": [round(float(v), 6) for v in self.scale],
            "weight": [round(float(v), 6) for v in self.weight],
            "bias": round(float(self.bias), 6),
            "threshold": round(float(self.threshold), 6),
            "thresholds": {k: round(float(v), 6) for k, v in self.thresholds.items()},
        }

    def score(self, s: np.ndarray) -> np.ndarray:
        return ((s - self.mean) / self.scale) @ self.weight + self.bias

    def at(self, path: str | None) -> float:
        return self.thresholds.get(path, self.threshold) if path is not None else self.threshold

    def two(self, s: np.ndarray, path: str | None = None) -> np.ndarray:
        """signals [N,6] of inputs that came by `path` -> [N] bool: a second digit is there."""
        return self.score(s) >= self.at(path)


def fit(s: np.ndarray, two: np.ndarray, l2: float = 1e-3, steps: int = 50, names: tuple[str, ...] = SIGNAL_NAMES) -> PairRule:
    """Logistic regression by Newton's method on standardised signals `names` (threshold 0 until `choose_thresholds` or
    `floors`); `two`: the inputs the score is to be high for."""
    mean, scale = s.mean(0), s.std(0) + 1e-6
    z = np.concatenate([(s - mean) / scale, np.ones((len(s), 1))], 1).astype(np.float64)
    y = two.astype(np.float64)
    w = np.zeros(z.shape[1])
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(z @ w)))
        grad = z.T @ (p - y) / len(y) + l2 * np.r_[w[:-1], 0.0]
        hess = (z * (p * (1 - p))[:, None]).T @ z / len(y) + l2 * np.eye(len(w))
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return PairRule(mean, scale, w[:-1], float(w[-1]), 0.0, names=names)


def mistakes(rule: PairRule, s: np.ndarray, two: np.ndarray, threshold: float) -> tuple[float, float]:
    """(lone digits called two, pairs called one) as shares at a threshold."""
    t = threshold
    called = rule.score(s) >= t
    return float(called[~two].mean()) if (~two).any() else 0.0, float((~called[two]).mean()) if two.any() else 0.0


def choose_thresholds(rule: PairRule, paths: Mapping[str, tuple[np.ndarray, np.ndarray]]) -> PairRule:
    """Each path's threshold, keeping the worse of its two mistakes lowest, and a default one for all paths together
    (`paths`: name -> (signals, two))."""

    def best(groups: list[tuple[np.ndarray, np.ndarray]]) -> float:
        scores = np.concatenate([rule.score(s) for s, _ in groups])
        candidates = np.unique(np.quantile(scores, np.linspace(0.0, 1.0, 401)))
        return float(min(candidates, key=lambda t: max(max(mistakes(rule, s, two, t)) for s, two in groups)))

    own = {name: best([group]) for name, group in paths.items()}
    return replace(rule, threshold=best(list(paths.values())), thresholds=own)


def floors(rule: PairRule, real: Mapping[str, np.ndarray], share: float) -> PairRule:
    """Each path's threshold at the `share` quantile of its real inputs' scores (`real`: path -> their signals), and a
    default one over all of them: a rule that tells digits from what is none turns away that share of real inputs."""
    own = {name: float(np.quantile(rule.score(s), share)) for name, s in real.items()}
    return replace(rule, threshold=float(np.quantile(np.concatenate([rule.score(s) for s in real.values()]), share)), thresholds=own)
