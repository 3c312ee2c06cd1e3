"""`python -m bench.honesty [--split held_out] [--scale 1] [--sets ...]`: how honest the service's `blank` and `is_digit`
answers are on what people upload (model/honesty_sets.py), and which signals could make them honest.

Each image goes the way an upload goes: encoded as PNG, decoded and preprocessed by the service's own to_inputs, run
through the service's engine (lengths and the counterfactual reconstruction errors of all ten capsules), and judged by
the model card's DigitRule.judge, in this process. Per set: the share answered blank, the share with is_digit false,
and for digit sets the accuracy. Then, for the inputs not answered blank (the rule only ever sees those), the ROC AUC
with which each signal tells real digits from non-digits: the rule's own margin and the candidates a better rule could
use, and the share of non-digits each signal turns away at the threshold that turns away 2% of the real digits.

Writes bench/results/honesty.json (honesty-calibration.json for the calibration split) and prints the tables.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np

from model import MNIST_DIR
from model import honesty_sets as hs
from model.digit_rule import auc, signals
from service.engine.card import DigitRule, ModelCard, load_card
from service.engine.local import Engine, load_engine
from service.inputs.uploads import to_inputs
from service.settings import Settings
from service.threads import BoundedPool

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
BATCH = 32  # the batcher's largest batch (Settings.max_batch)
DIGIT_COST = 0.02  # share of real digits a candidate threshold may turn away, for `rejected`

Signal = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray, DigitRule], np.ndarray]


def _winner(lengths: np.ndarray) -> np.ndarray:
    return lengths.argmax(1)


def _at(values: np.ndarray, index: np.ndarray) -> np.ndarray:
    return values[np.arange(len(values)), index]


def _others(values: np.ndarray, index: np.ndarray) -> np.ndarray:
    """values [N,10] without each row's `index` column: [N,9]."""
    keep = np.ones(values.shape, bool)
    keep[np.arange(len(values)), index] = False
    return values[keep].reshape(len(values), values.shape[1] - 1)


def _second_length(lengths: np.ndarray) -> np.ndarray:
    return np.sort(lengths, 1)[:, -2]


# Each signal is oriented so that higher means more like a digit (errors are negated); inputs x [N,28,28].
SIGNALS: dict[str, tuple[str, Signal]] = {
    "rule_score": (
        "the card's is_digit score (model/digit_rule.py): a digit iff >= its threshold",
        lambda x, ln, er, po, r: r.scorer.score(signals(ln, er, po)) - r.threshold,
    ),
    "winner_length": ("L_w", lambda x, ln, er, po, r: _at(ln, _winner(ln))),
    "length_gap": ("L_w - the second longest", lambda x, ln, er, po, r: _at(ln, _winner(ln)) - _second_length(ln)),
    "other_lengths": ("-(sum of the nine other lengths)", lambda x, ln, er, po, r: -_others(ln, _winner(ln)).sum(1)),
    "winner_error": ("-E_w", lambda x, ln, er, po, r: -_at(er, _winner(ln))),
    "min_error": ("-(min over the ten E)", lambda x, ln, er, po, r: -er.min(1)),
    "error_ratio": (
        "-(E_w / min over the other nine E)",
        lambda x, ln, er, po, r: -_at(er, _winner(ln)) / np.maximum(_others(er, _winner(ln)).min(1), 1e-9),
    ),
    "error_gap": ("min over the other nine E - E_w", lambda x, ln, er, po, r: _others(er, _winner(ln)).min(1) - _at(er, _winner(ln))),
    "ink": ("sum of the 28x28 input", lambda x, ln, er, po, r: x.sum((1, 2))),
    "ink_coverage": ("share of the 28x28 input above 0.1", lambda x, ln, er, po, r: (x > 0.1).mean((1, 2))),
    "ink_strength": (
        "mean of the input where above 0.1",
        lambda x, ln, er, po, r: x.sum((1, 2), where=x > 0.1) / np.maximum((x > 0.1).sum((1, 2)), 1),
    ),
}


def _png(image: np.ndarray) -> bytes:
    ok, data = cv2.imencode(".png", image, [cv2.IMWRITE_PNG_COMPRESSION, 1])
    if not ok:
        raise RuntimeError("OpenCV could not encode a PNG")
    return data.tobytes()


async def _preprocess(blobs: list[bytes], settings: Settings, card: ModelCard, pool: BoundedPool) -> np.ndarray:
    parts = []
    for start in range(0, len(blobs), BATCH):
        chunk = blobs[start : start + BATCH]
        parts.append(
            await to_inputs(chunk, pool, settings.max_image_pixels, settings.inline_decode_pixels, card.image_size, card.digit_box)
        )
    return np.concatenate(parts)


def _run(engine: Engine, inputs: np.ndarray) -> dict[str, np.ndarray]:
    """The outputs the rule reads, for every input: lengths, recon_errors, poses."""
    parts = [engine.predict(inputs[start : start + BATCH], fetch=frozenset()) for start in range(0, len(inputs), BATCH)]
    return {k: np.concatenate([p[k] for p in parts]) for k in ("lengths", "recon_errors", "poses")}


def _share(mask: np.ndarray) -> float:
    return round(float(mask.mean()), 4) if mask.size else 0.0


def measure_set(
    name: str, split: str, n: int, mnist_dir: Path, settings: Settings, card: ModelCard, engine: Engine, pool: BoundedPool
) -> dict:
    """One set through preprocessing, the engine and the rule: its row, and the arrays the signals are read from."""
    t0 = time.perf_counter()
    images, labels = hs.make_set(name, split, n, mnist_dir)
    t1 = time.perf_counter()
    inputs = asyncio.run(_preprocess([_png(im) for im in images], settings, card, pool))
    t2 = time.perf_counter()
    out = _run(engine, inputs)
    lengths, errors = out["lengths"], out["recon_errors"]
    t3 = time.perf_counter()
    blank, digit, why = card.digit_rule.judge(inputs, out)
    prediction = lengths.argmax(1)
    kind = hs.SETS[name].kind
    row: dict = {
        "set": name,
        "kind": kind,
        "n": len(images),
        "blank": _share(blank),
        "is_digit_false": _share(~digit),
        "flagged": _share(~blank & ~digit),  # seen by the rule and turned away
    }
    reasons = [w[0] for w in why if w is not None]
    row["why"] = {g: reasons.count(g) for g in sorted(set(reasons))}
    if labels is not None:
        right = prediction == labels
        row["accuracy"] = _share(right)
        row["accuracy_when_is_digit"] = _share(right[digit])
    if kind == "digit":
        honest = digit & (prediction == labels)  # read right and called a digit
    elif kind == "blank":
        honest = blank
    else:
        honest = ~digit
    row["honest"] = _share(honest)
    row["seconds"] = {"generate": round(t1 - t0, 2), "preprocess": round(t2 - t1, 2), "engine": round(t3 - t2, 2)}
    arrays = {"inputs": inputs[:, 0], "lengths": lengths, "errors": errors, "poses": out["poses"]}
    return {"row": row, **arrays, "blank": blank, "labels": labels}


def separation(measured: dict[str, dict], rule: DigitRule) -> dict:
    """Per signal: AUCs of real digits against each kind of non-digit, and of each digit set against all non-digits; and
    the share of each kind of non-digit below the threshold that turns away DIGIT_COST of the real digits. Only inputs
    not answered blank count: the others never reach the rule."""
    seen = {
        name: {k: m[k][~m["blank"]] for k in ("inputs", "lengths", "errors", "poses")} | {"kind": hs.SETS[name].kind}
        for name, m in measured.items()
    }
    glyph_sets = [s for s in seen if s.startswith("glyphs")]
    groups = {
        "glyphs": glyph_sets,
        "scribbles": [s for s in seen if s == "scribbles"],
        "blank_missed": [s for s in seen if seen[s]["kind"] == "blank"],
    }
    groups["all_non_digits"] = [s for s in seen if seen[s]["kind"] != "digit"]
    digit_sets = [s for s in seen if seen[s]["kind"] == "digit"]
    out: dict = {}
    for signal, (definition, fn) in SIGNALS.items():
        scores = {s: fn(v["inputs"], v["lengths"], v["errors"], v["poses"], rule) for s, v in seen.items()}
        digits = np.concatenate([scores[s] for s in digit_sets]) if digit_sets else np.zeros(0)
        negatives = {g: np.concatenate([scores[s] for s in members]) if members else np.zeros(0) for g, members in groups.items()}
        threshold = float(np.quantile(digits, DIGIT_COST)) if len(digits) else None
        out[signal] = {
            "definition": definition,
            "auc_digits_vs": {g: _round(auc(digits, neg)) for g, neg in negatives.items()},
            "auc_vs_all_non_digits": {s: _round(auc(scores[s], negatives["all_non_digits"])) for s in digit_sets},
            "threshold_at_digit_cost": _round(threshold),
            "rejected_at_digit_cost": {
                g: _share(neg < threshold) if threshold is not None and len(neg) else None for g, neg in negatives.items()
            },
        }
    return out


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def _fmt(x: float | None, pct: bool = False) -> str:
    if x is None:
        return "-"
    return f"{100 * x:.1f}" if pct else f"{x:.3f}"


def table(result: dict) -> str:
    lines = [
        f"honesty sets, split {result['split']}; model {result['model']['version']} ({result['model']['file']}); rule {result['rule']}",
        "",
        f"{'set':<14}{'kind':<11}{'n':>6}{'blank %':>9}{'is_digit false %':>18}{'flagged %':>11}{'accuracy %':>12}{'honest %':>10}",
    ]
    for r in result["sets"]:
        lines.append(
            f"{r['set']:<14}{r['kind']:<11}{r['n']:>6}{_fmt(r['blank'], True):>9}{_fmt(r['is_digit_false'], True):>18}"
            f"{_fmt(r['flagged'], True):>11}{_fmt(r.get('accuracy'), True):>12}{_fmt(r['honest'], True):>10}"
        )
    signals = result["signals"]
    first = next(iter(signals.values()))
    groups, digit_sets = list(first["auc_digits_vs"]), list(first["auc_vs_all_non_digits"])
    lines += ["", "ROC AUC (inputs not answered blank): all real digits vs each kind; then each digit set vs all non-digits"]
    lines.append(f"{'signal':<22}" + "".join(f"{g:>16}" for g in groups) + "".join(f"{s:>14}" for s in digit_sets))
    for name, s in signals.items():
        lines.append(
            f"{name:<22}"
            + "".join(f"{_fmt(s['auc_digits_vs'][g]):>16}" for g in groups)
            + "".join(f"{_fmt(s['auc_vs_all_non_digits'][d]):>14}" for d in digit_sets)
        )
    lines += ["", f"non-digits turned away (%) at the threshold that turns away {100 * DIGIT_COST:.0f}% of the real digits"]
    lines.append(f"{'signal':<22}" + "".join(f"{g:>16}" for g in groups))
    for name, s in signals.items():
        lines.append(f"{name:<22}" + "".join(f"{_fmt(s['rejected_at_digit_cost'][g], True):>16}" for g in groups))
    lines += [
        "",
        f"{result['seconds']['total']:.0f} s in all: " + ", ".join(f"{k} {v:.0f} s" for k, v in result["seconds"].items() if k != "total"),
    ]
    return "\n".join(lines)


def save_inputs(path: Path, measured: dict[str, dict]) -> None:
    """Per set `<set>/inputs` [N,28,28] float16, `<set>/lengths` and `<set>/errors` [N,10], `<set>/blank` and, for digit
    sets, `<set>/labels`."""
    arrays = {}
    for name, m in measured.items():
        arrays |= {f"{name}/inputs": m["inputs"].astype(np.float16), f"{name}/lengths": m["lengths"], f"{name}/errors": m["errors"]}
        arrays[f"{name}/blank"] = m["blank"]
        if m["labels"] is not None:
            arrays[f"{name}/labels"] = m["labels"]
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **arrays)


def run(
    split: str,
    weights: Path,
    mnist_dir: Path,
    precision: str = "auto",
    threads: int = 1,
    scale: float = 1.0,
    names: list[str] | None = None,
    inputs_to: Path | None = None,
) -> dict:
    """Every set of `names` (all of SETS by default), `scale` times its usual size, through the service in this process."""
    t0 = time.perf_counter()
    settings = Settings()
    card = load_card(weights)
    engine = load_engine(weights, card, "cpu", threads, precision)
    pool = BoundedPool(settings.decode_workers, settings.decode_pool_pixels)
    measured = {}
    try:
        for name in names or list(hs.SETS):
            measured[name] = measure_set(name, split, max(1, round(hs.SETS[name].n * scale)), mnist_dir, settings, card, engine, pool)
    finally:
        pool.shutdown()
    if inputs_to is not None:
        save_inputs(inputs_to, measured)
    rows = [m["row"] for m in measured.values()]
    parts = {k: round(sum(r["seconds"][k] for r in rows), 1) for k in ("generate", "preprocess", "engine")}
    result = {
        "split": split,
        "model": {"name": card.name, "version": card.version, "file": engine.model_file, "precision": engine.precision},
        "rule": card.digit_rule.model_dump(),
        "fonts": {"packages": list(hs.FONT_PACKAGES), "files": len(hs.fonts_for(split))},
        "sets": rows,
        "signals": separation(measured, card.digit_rule),
    }
    result["rule_cost"] = rule_cost(card, engine)
    result["seconds"] = {**parts, "total": round(time.perf_counter() - t0, 1)}
    return result


def rule_cost(card: ModelCard, engine: Engine, repeat: int = 2000) -> dict:
    """The rule's time for one input, as /predict runs it after every engine call, next to that call's own time."""
    x = np.zeros((1, 1, card.image_size, card.image_size), np.float32)
    x[0, 0, 6:22, 12:16] = 1.0
    start = time.perf_counter()
    for _ in range(50):
        out = engine.predict(x, fetch=frozenset())
    predict_s = (time.perf_counter() - start) / 50
    start = time.perf_counter()
    for _ in range(repeat):
        card.digit_rule.judge(x, out)
    return {"us_per_input": round(1e6 * (time.perf_counter() - start) / repeat, 1), "predict_ms": round(1e3 * predict_s, 2)}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--split", choices=hs.SPLITS, default="held_out")
    p.add_argument("--weights", type=Path, default=ROOT / "weights")
    p.add_argument("--data", type=Path, default=ROOT / MNIST_DIR, help="directory holding MNIST's IDX files")
    p.add_argument(
        "--precision", choices=("auto", "fp32", "int8"), default="auto", help="as the service's CAPSNET_PRECISION (auto: int8 on the CPU)"
    )
    p.add_argument("--threads", type=int, default=1, help="onnxruntime intra-op threads")
    p.add_argument("--scale", type=float, default=1.0, help="multiplies every set's usual size")
    p.add_argument("--sets", nargs="*", choices=list(hs.SETS), default=list(hs.SETS))
    p.add_argument("--results", type=Path, default=RESULTS)
    p.add_argument(
        "--save-inputs",
        type=Path,
        help="also write the 28x28 network inputs (float16), lengths, errors, answers and labels of every set to this .npz: "
        "what a rule can be calibrated on without the service",
    )
    args = p.parse_args(argv)
    result = run(args.split, args.weights, args.data, args.precision, args.threads, args.scale, args.sets, args.save_inputs)
    args.results.mkdir(parents=True, exist_ok=True)
    name = "honesty.json" if args.split == "held_out" else f"honesty-{args.split}.json"
    (args.results / name).write_text(json.dumps(result, indent=1) + "\n")
    print(table(result))


if __name__ == "__main__":
    main()
