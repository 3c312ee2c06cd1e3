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

Which two capsules a pair is (`PairChoice`): the paper names the two longest, and the network's right pair is among
the three longest far more often than it is the two longest (97.1% against 91.2% of the 10,000 test pairs). A
three-way softmax read-out picks one of the three pairs those three capsules make (CANDIDATES), from each pair's
lengths and how its two redrawings together explain the input (CHOICE_SIGNAL_NAMES): the ink they leave unexplained
and the ink they draw where there is none. Fitted on training pairs of every path; on the held-out pairs of each path
it names both digits of about a point more than the two longest do (the card's `multimnist.pair_choice`).

A further read-out, on those signals, what the six shortest capsules claim together and the longest capsule's pose
(DIGITS_SIGNAL_NAMES), through a layer of tanh units (`fit_hidden`), tells whether an input holds digits at all: fitted
on real inputs of every path against the letters, symbols and scribbles of the one-digit network's `is_digit` sets and
noise, each path's threshold (`floors`) turns away a set share of its real inputs. The network always has two longest
capsules; what it reads in a letter is no digit, and the service says so. The pose, as in `is_digit`
(model/digit_rule.py): a capsule encodes a digit's stroke, width and skew in the range its training digits span, and a
letter that wins one sits outside it. (A logistic read-out of these signals, and of the two longest capsules' poses,
turned away fewer letters at the same share of real inputs: BENCHMARKS.md, the notes.)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

SIGNAL_NAMES = ("first_length", "second_length", "third_length", "fourth_length", "first_explains", "second_adds")
# whether the input holds digits at all: the same, what the six shortest capsules claim together (a letter or a
# scribble leaves several capsules half long where digits leave them short), and the longest capsule's pose
POSE_SIGNAL_NAMES = tuple(f"first_pose_{d}" for d in range(16))
DIGITS_SIGNAL_NAMES = (*SIGNAL_NAMES, "rest_length", *POSE_SIGNAL_NAMES)
PATHS = ("pixels", "upload", "canvas")  # how an input reached the network: JSON pixels, a picture, the page's drawing
# the pairs of the three longest capsules (ranks, longest first) that a pair of digits may be, and what is read of each
CANDIDATES = ((0, 1), (0, 2), (1, 2))
CHOICE_SIGNAL_NAMES = (
    *(f"{a}{b}_{s}" for a, b in CANDIDATES for s in ("first_length", "second_length", "unexplained", "misses", "overdraws")),
    *SIGNAL_NAMES[:4],
)


def signals(lengths: np.ndarray, reconstructions: np.ndarray, images: np.ndarray) -> np.ndarray:
    """lengths [N,10], the two longest capsules' redrawings [N,2,1,S,S] (longest first), inputs [N,1,S,S] -> [N,6]."""
    ranked = -np.sort(-lengths, axis=1)[:, :4]
    x = images.reshape(len(images), -1).astype(np.float64)
    r = reconstructions.reshape(len(images), 2, -1).astype(np.float64)
    ink = np.maximum(np.square(x).sum(1), 1.0)  # a few pixels of ink at least: a speck's ratios stay finite
    alone = np.square(x - r[:, 0]).sum(1) / ink
    both = np.square(x - np.minimum(r[:, 0] + r[:, 1], 1.0)).sum(1) / ink
    return np.concatenate([ranked, np.stack([1.0 - alone, alone - both], 1)], 1).astype(np.float32)


def digits_signals(lengths: np.ndarray, poses: np.ndarray, reconstructions: np.ndarray, images: np.ndarray) -> np.ndarray:
    """`signals`, then the six shortest capsules' summed length and the longest capsule's pose -> [N,23]
    (DIGITS_SIGNAL_NAMES). poses [N,10,16]."""
    return with_digits(signals(lengths, reconstructions, images), lengths, poses)


def with_digits(s: np.ndarray, lengths: np.ndarray, poses: np.ndarray) -> np.ndarray:
    """`signals` already computed [N,6], the lengths [N,10] and poses [N,10,16] -> DIGITS_SIGNAL_NAMES [N,23], for a
    caller that reads both rules of one input."""
    order = np.argsort(-lengths, axis=1, kind="stable")
    rest = np.take_along_axis(lengths, order[:, 4:], axis=1).sum(1, keepdims=True)
    longest = poses[np.arange(len(poses)), order[:, 0]]  # [N,16]
    return np.concatenate([s, rest, longest], 1).astype(np.float32)


def choice_signals(lengths: np.ndarray, redrawings: np.ndarray, images: np.ndarray) -> np.ndarray:
    """lengths [N,10], the three longest capsules' redrawings [N,3,1,S,S] (longest first), inputs [N,1,S,S] ->
    CHOICE_SIGNAL_NAMES [N,19]: for each candidate pair its two lengths and, of the input's ink, what the pair's redrawings
    together leave unexplained (squared error), miss (ink they do not draw) and overdraw (drawn where there is none)."""
    ranked = -np.sort(-lengths, axis=1)[:, :4]
    x = images.reshape(len(images), -1).astype(np.float64)
    r = redrawings.reshape(len(images), 3, -1).astype(np.float64)
    ink = np.maximum(np.square(x).sum(1), 1.0)
    per_pair = []
    for a, b in CANDIDATES:
        both = np.minimum(r[:, a] + r[:, b], 1.0)
        per_pair += [
            ranked[:, a],
            ranked[:, b],
            np.square(x - both).sum(1) / ink,
            np.square(np.maximum(x - both, 0.0)).sum(1) / ink,
            np.square(np.maximum(both - x, 0.0)).sum(1) / ink,
        ]
    return np.concatenate([np.stack(per_pair, 1), ranked], 1).astype(np.float32)


def third_redrawing(reconstruct: Callable[[np.ndarray, np.ndarray], np.ndarray], lengths: np.ndarray, poses: np.ndarray) -> np.ndarray:
    """The third-longest capsule's redrawing [N,1,1,S,S], beside the network's own two what `choice_signals` weighs.
    `reconstruct`: the decoder, digits int64 [N] and poses [N,16] -> [N,1,S,S] (the service's engine, or a session)."""
    third = np.argsort(-lengths, axis=1, kind="stable")[:, 2]
    drawn = reconstruct(third.astype(np.int64), poses[np.arange(len(poses)), third])
    return drawn.reshape(len(lengths), 1, *drawn.shape[1:])


@dataclass(frozen=True)
class PairChoice:
    """Which of CANDIDATES a pair of digits is: a softmax read-out of the standardised CHOICE_SIGNAL_NAMES."""

    mean: np.ndarray  # [len(CHOICE_SIGNAL_NAMES)]
    scale: np.ndarray  # [len(CHOICE_SIGNAL_NAMES)]
    weight: np.ndarray  # [len(CANDIDATES), len(CHOICE_SIGNAL_NAMES)]
    bias: np.ndarray  # [len(CANDIDATES)]

    @classmethod
    def from_card(cls, rule: Mapping[str, Any]) -> PairChoice:
        """The card's read-out, which must have been fitted on the signals and candidates this module computes."""
        if tuple(rule["signals"]) != CHOICE_SIGNAL_NAMES or [tuple(c) for c in rule["candidates"]] != list(CANDIDATES):
            raise ValueError("the card's pair choice was fitted on other signals or candidates than model/pair_rule.py computes")
        arrays = {k: np.asarray(rule[k], np.float64) for k in ("mean", "scale", "weight", "bias")}
        d, k = len(CHOICE_SIGNAL_NAMES), len(CANDIDATES)
        shapes = {"mean": (d,), "scale": (d,), "weight": (k, d), "bias": (k,)}
        if any(arrays[name].shape != shape for name, shape in shapes.items()):
            raise ValueError("the card's pair choice has figures of the wrong shape for its signals")
        return cls(**arrays)

    def as_card(self) -> dict[str, Any]:
        return {
            "signals": list(CHOICE_SIGNAL_NAMES),
            "candidates": [list(c) for c in CANDIDATES],
            "mean": [round(float(v), 6) for v in self.mean],
            "scale": [round(float(v), 6) for v in self.scale],
            "weight": np.round(self.weight, 6).tolist(),
            "bias": [round(float(v), 6) for v in self.bias],
        }

    def pick(self, s: np.ndarray) -> np.ndarray:
        """choice signals [N,19] -> [N] index into CANDIDATES."""
        return np.argmax(((s - self.mean) / self.scale) @ self.weight.T + self.bias, axis=1)

    def ranks(self, s: np.ndarray) -> np.ndarray:
        """choice signals [N,19] -> [N,2]: the ranks (0: the longest capsule) of the two capsules each pair is."""
        return np.asarray(CANDIDATES)[self.pick(s)]


def fit_choice(s: np.ndarray, right: np.ndarray, l2: float = 1e-3, steps: int = 50) -> PairChoice:
    """Softmax regression by Newton's method on standardised choice signals `s` [N,19]; `right` [N,3] bool: which
    candidates name both digits (pairs none of whose candidates does are left out: they say nothing of the choice).
    The first candidate's logit is held at zero, the others' measured from it."""
    keep = right.any(1)
    s, y = s[keep], right[keep].argmax(1)
    mean, scale = s.mean(0), s.std(0) + 1e-6
    z = np.concatenate([(s - mean) / scale, np.ones((len(s), 1))], 1).astype(np.float64)  # [M,D+1]
    k, d = len(CANDIDATES), z.shape[1]
    onehot = np.eye(k)[y]
    w = np.zeros((k - 1, d))  # the free logits: candidates 1..k-1
    for _ in range(steps):
        logits = np.concatenate([np.zeros((len(z), 1)), z @ w.T], 1)
        p = np.exp(logits - logits.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        grad = ((p - onehot)[:, 1:].T @ z) / len(z) + l2 * np.concatenate([w[:, :-1], np.zeros((k - 1, 1))], 1)
        hess = np.zeros((k - 1, d, k - 1, d))
        for i in range(1, k):
            for j in range(1, k):
                c = p[:, i] * ((i == j) - p[:, j])
                hess[i - 1, :, j - 1, :] = (z * c[:, None]).T @ z / len(z)
        hess = hess.reshape((k - 1) * d, (k - 1) * d) + l2 * np.eye((k - 1) * d)
        step = np.linalg.solve(hess, grad.reshape(-1)).reshape(k - 1, d)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    full = np.concatenate([np.zeros((1, d)), w], 0)
    return PairChoice(mean, scale, full[:, :-1], full[:, -1])


@dataclass(frozen=True)
class PairRule:
    mean: np.ndarray  # [len(names)]
    scale: np.ndarray  # [len(names)]
    weight: np.ndarray  # [len(names)], or [H] over a hidden layer's units
    bias: float
    threshold: float  # for a path without one of its own
    thresholds: Mapping[str, float] = field(default_factory=dict)  # path -> its threshold
    names: tuple[str, ...] = SIGNAL_NAMES  # the signals it reads: SIGNAL_NAMES (one digit or two), DIGITS_SIGNAL_NAMES
    # a layer of tanh units between the standardised signals and the read-out (`fit_hidden`); None: logistic (`fit`)
    hidden_weight: np.ndarray | None = None  # [H,len(names)]
    hidden_bias: np.ndarray | None = None  # [H]

    @classmethod
    def from_card(cls, rule: Mapping[str, Any], names: tuple[str, ...] = SIGNAL_NAMES) -> PairRule:
        """The card's rule, which must have been fitted on `names` as this module computes them."""
        if tuple(rule["signals"]) != names:
            raise ValueError("the card's pair rule was fitted on other signals than model/pair_rule.py computes")
        arrays = {k: np.asarray(rule[k], np.float64) for k in ("mean", "scale", "weight")}
        hidden = {k: np.asarray(rule[k], np.float64) for k in ("hidden_weight", "hidden_bias") if k in rule}
        inputs = len(names)
        if hidden:  # what the read-out's weights multiply: the tanh units, else the signals
            w, b = hidden.get("hidden_weight"), hidden.get("hidden_bias")
            if w is None or b is None or w.ndim != 2 or w.shape[1] != len(names) or b.shape != (len(w),):
                raise ValueError("the card's pair rule has a hidden layer of the wrong shape (hidden_weight [H,signals], hidden_bias [H])")
            inputs = len(w)
        if arrays["mean"].shape != (len(names),) or arrays["scale"].shape != (len(names),) or arrays["weight"].shape != (inputs,):
            raise ValueError("the card's pair rule has figures of the wrong shape for its signals")
        thresholds = {k: float(v) for k, v in rule.get("thresholds", {}).items()}
        return cls(**arrays, **hidden, bias=float(rule["bias"]), threshold=float(rule["threshold"]), thresholds=thresholds, names=names)

    def as_card(self) -> dict[str, Any]:
        return {
            "signals": list(self.names),
            "mean": [round(float(v), 6) for v in self.mean],
            "scale": [round(float(v), 6) for v in self.scale],
            "weight": [round(float(v), 6) for v in self.weight],
            "bias": round(float(self.bias), 6),
            "threshold": round(float(self.threshold), 6),
            "thresholds": {k: round(float(v), 6) for k, v in self.thresholds.items()},
            **({} if self.hidden_weight is None else {"hidden_weight": np.round(self.hidden_weight, 6).tolist()}),
            **({} if self.hidden_bias is None else {"hidden_bias": np.round(self.hidden_bias, 6).tolist()}),
        }

    def score(self, s: np.ndarray) -> np.ndarray:
        z = (s - self.mean) / self.scale
        if self.hidden_weight is not None:
            z = np.tanh(z @ self.hidden_weight.T + self.hidden_bias)
        return z @ self.weight + self.bias

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


def fit_hidden(
    s: np.ndarray, real: np.ndarray, names: tuple[str, ...], hidden: int = 8, l2: float = 1e-3, steps: int = 1500, seed: int = 0
) -> PairRule:
    """A layer of `hidden` tanh units, then the logistic read-out, on standardised signals `names`: the two classes
    weighed equally, fitted by full-batch Adam (rate 0.01, `l2` on every weight and bias) from a seeded start (threshold 0 until
    `floors`). Why more than `fit`: a pose is a digit's when its dimensions sit together as training digits' do, which
    no one weighted sum of them tells (the `is_digit` rule reads the one-digit network's poses the same way)."""
    mean, scale = s.mean(0), s.std(0) + 1e-6
    z = ((s - mean) / scale).astype(np.float64)
    y = real.astype(np.float64)
    sample = np.where(real, 0.5 / y.mean(), 0.5 / (1.0 - y.mean())) / len(y)  # each class half the loss
    rng = np.random.default_rng(seed)
    bound_in, bound_out = 1.0 / np.sqrt(z.shape[1]), 1.0 / np.sqrt(hidden)
    params = [
        rng.uniform(-bound_in, bound_in, (hidden, z.shape[1])),
        rng.uniform(-bound_in, bound_in, hidden),
        rng.uniform(-bound_out, bound_out, hidden),
        np.zeros(1),
    ]
    moments = [(np.zeros_like(p), np.zeros_like(p)) for p in params]
    for t in range(1, steps + 1):
        w1, b1, w2, b2 = params
        h = np.tanh(z @ w1.T + b1)  # [N,H]
        p = 1.0 / (1.0 + np.exp(-(h @ w2 + b2[0])))
        d_out = (p - y) * sample  # d loss / d logit
        d_h = np.outer(d_out, w2) * (1.0 - h * h)
        grads = [d_h.T @ z, d_h.sum(0), h.T @ d_out, np.array([d_out.sum()])]
        for k, (param, grad) in enumerate(zip(params, grads)):
            grad = grad + l2 * param
            m, v = moments[k]
            m[:] = 0.9 * m + 0.1 * grad
            v[:] = 0.999 * v + 0.001 * grad * grad
            param -= 0.01 * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
    w1, b1, w2, b2 = params
    return PairRule(mean, scale, w2, float(b2[0]), 0.0, names=names, hidden_weight=w1, hidden_bias=b1)


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
