"""Two digits as people send them: lone digits and pairs through each of the service's paths, read by the two-digit
network and the card's one-or-two rule, and (`--calibrate`) that rule fitted anew (model/pair_rule.py).

The paths, each from the same digits placed as MultiMNIST places them (each centred on the 36x36 canvas and shifted up
to 4 px each way, the second of another class):
- pixels: the composite sent as JSON `pixels`, as the network's own test pairs are;
- upload: dark ink on white paper, 72, 144 or 288 px square as PNG and 144 px as JPEG, through the service's
  preprocessing (service/inputs: find the ink, scale it to the card's pair box, centre it);
- canvas: pen strokes traced from each digit (model/pen_strokes.py) drawn with the page's round pen on its 280 px
  canvas, through the service's drawing path (the alpha is the ink).

The held-out pairs are also sent written apart, side by side as people write two digits (their 28 px frames 0, 4 or 8
px apart), uploaded and drawn: the service lays them over each other as MultiMNIST's pairs are
(service/inputs/preprocess.fit_pair).

The rule is fitted on MNIST's training digits (the calibration split) and measured on its test digits (held out);
`python -m bench.pair_paths --calibrate` writes it, with the held-out figures of every path, into the card's
`multimnist.second_digit`; `make bench` measures the committed card's rule the same way.
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import warnings
from pathlib import Path

import numpy as np
import onnxruntime as ort
from PIL import Image

from harness.pen_paths import apart_strokes, pair_items
from model import MNIST_DIR, MULTIMNIST_DECODER_FILE, MULTIMNIST_FILE, honesty_sets
from model.idx import load_mnist
from model.pair_rule import (
    CANDIDATES,
    DIGITS_SIGNAL_NAMES,
    PATHS,
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
    third_redrawing,
    with_digits,
)
from model.pen_strokes import DRAWN_PEN, PAGE_SIDE, PEN, pen_digits, render, trace
from model.pen_strokes import place as place_strokes
from service.inputs.images import load_pixels, open_image
from service.inputs.preprocess import WORK_SIDE, drawing_to_mnist, to_mnist

log = logging.getLogger("bench.pair_paths")

CANVAS = 36  # the two-digit network's canvas
UPLOADS = (("png", 72), ("png", 144), ("png", 288), ("jpeg", 144))
SEEDS = {"calibration": 11, "held_out": 2017}
NON_DIGITS = ("glyphs_clean", "glyphs_photo", "scribbles", "noise")
TURNED_AWAY = 0.0025  # the share of real inputs of each path the digits-at-all rule may turn away (on the calibration digits)
APART_GAPS = (0, 4, 8)  # px between the 28 px frames of two digits written apart: their ink about 8 to 16 px apart


def _composite(x: np.ndarray, item: dict) -> np.ndarray:
    """x: the digits, [N,28,28] 0-255 or [N,28,28] in [0,1] as float32 (the pen's redrawings)."""
    out = np.zeros((CANVAS, CANVAS), np.float32)
    pad = (CANVAS - 28) // 2
    for d, (dy, dx) in zip(item["digits"], item["shifts"]):
        out[pad + dy : pad + dy + 28, pad + dx : pad + dx + 28] += x[d] / 255.0 if x.dtype == np.uint8 else x[d]
    return np.minimum(out, 1.0)


def traced_pixels(x: np.ndarray, items: list[dict]) -> np.ndarray:
    """The same items made of their digits' pen strokes (model/pen_strokes.py), composited as the test pairs are and sent
    as pixels: what tracing the strokes alone costs, without the page or the service. [N,1,36,36]."""
    used = sorted({d for it in items for d in it["digits"]})
    pen = np.zeros((len(x), 28, 28), np.float32)
    pen[used] = pen_digits(x[used], DRAWN_PEN)
    return np.stack([_composite(pen, it) for it in items])[:, None]


def _upload(img: np.ndarray, k: int, box: int, digit_box: int) -> np.ndarray:
    """img [H,W] in [0,1] as ink on white paper UPLOADS[k] px high, through the service's preprocessing."""
    fmt, side = UPLOADS[k % len(UPLOADS)]
    h, w = img.shape
    paper = Image.fromarray((255 - img * 255).astype(np.uint8)).resize((round(side * w / h), side), Image.Resampling.BICUBIC)
    buf = io.BytesIO()
    paper.save(buf, format=fmt.upper(), **({"quality": 85} if fmt == "jpeg" else {}))
    return to_mnist(*load_pixels(open_image(buf.getvalue(), 16_000_000), WORK_SIDE), CANVAS, box, digit_box)


def _canvas(x: np.ndarray, item: dict, box: int, digit_box: int) -> np.ndarray:
    strokes = []
    for d, (dy, dx) in zip(item["digits"], item["shifts"]):
        strokes += place_strokes(trace(x[d] / 255.0), 28 / CANVAS, dx / CANVAS, dy / CANVAS)
    return drawing_to_mnist(render(strokes, PAGE_SIDE, PEN), CANVAS, box, digit_box)


def inputs(x: np.ndarray, items: list[dict], box: int, digit_box: int) -> dict[str, np.ndarray]:
    """{path: [N,1,36,36]} for the same items through each path."""
    pixels = np.stack([_composite(x, it) for it in items])
    return {
        "pixels": pixels[:, None],
        "upload": np.stack([_upload(img, k, box, digit_box) for k, img in enumerate(pixels)])[:, None],
        "canvas": np.stack([_canvas(x, it, box, digit_box) for it in items])[:, None],
    }


def apart(x: np.ndarray, items: list[dict], box: int, digit_box: int) -> dict[str, np.ndarray]:
    """{path: [N,1,36,36]} for pairs written apart, side by side in the order of their digits, the k-th APART_GAPS[k % 3]
    apart: uploaded as one picture of both (ink on paper), and drawn on the page's canvas, each digit on its own half
    (harness.pen_paths.apart_strokes); each digit down by half its row shift, at MNIST's scale, either way."""
    uploads, drawings = [], []
    for k, it in enumerate(items):
        gap = APART_GAPS[k % len(APART_GAPS)]
        row = np.zeros((28 + 8, 56 + gap), np.float32)
        for d, (dy, _), left in zip(it["digits"], it["shifts"], (0, 28 + gap), strict=True):
            top = 4 + int(dy) // 2
            row[top : top + 28, left : left + 28] = np.maximum(row[top : top + 28, left : left + 28], x[d] / 255.0)
        uploads.append(_upload(row, k, box, digit_box))
        strokes = apart_strokes([x[d] for d in it["digits"]], it["shifts"], gap)
        drawings.append(drawing_to_mnist(render(strokes[0] + strokes[1], PAGE_SIDE, PEN), CANVAS, box, digit_box))
    return {"upload": np.stack(uploads)[:, None], "canvas": np.stack(drawings)[:, None]}


def non_digits(split: str, n: int, box: int, digit_box: int, blank_below: float) -> dict[str, np.ndarray]:
    """What is no digit, uploaded: letters and symbols (clean and photographed) and scribbles from the `is_digit` rule's
    sets of the split (model/honesty_sets.py), and uniform noise, each made a 36x36 input as the service makes any
    picture; those it finds blank left out, as the service answers them blank. {set: [N,1,36,36]}."""
    rng = np.random.default_rng(SEEDS[split])
    sets = {
        "glyphs_clean": honesty_sets.glyphs(split, n, False)[0],
        "glyphs_photo": honesty_sets.glyphs(split, n, True)[0],
        "scribbles": honesty_sets.scribbles(split, n)[0],
        "noise": [(rng.random((64, 64)) * 255).astype(np.uint8) for _ in range(n)],
    }
    out = {}
    for name, images in sets.items():
        x = np.stack([to_mnist(np.asarray(im, np.float32) / 255.0, None, CANVAS, box, digit_box) for im in images])[:, None]
        out[name] = x[x.reshape(len(x), -1).sum(1) >= blank_below]
    return out


def as_kept(rule: PairRule) -> PairRule:
    """The rule as the card keeps it (six decimals), which is what the service reads: thresholds and figures are of it."""
    return PairRule.from_card(rule.as_card(), rule.names)


def digits_rule(real: dict[str, np.ndarray], none: dict[str, np.ndarray]) -> PairRule:
    """The digits-at-all rule fitted on real inputs (path -> signals: lone digits and pairs) against non-digits (set ->
    signals), each path's threshold turning away TURNED_AWAY of its real inputs."""
    s = np.concatenate([*real.values(), *none.values()])
    is_real = np.arange(len(s)) < sum(len(v) for v in real.values())
    return as_kept(floors(as_kept(fit_hidden(s, is_real, DIGITS_SIGNAL_NAMES)), real, TURNED_AWAY))


def digits_figures(rule: PairRule, real: dict[str, np.ndarray], none: dict[str, np.ndarray]) -> dict:
    """What the rule turns away: real inputs by path, and non-digits by set, read with the upload path's threshold (a
    picture of something else arrives as an upload)."""

    def away(x: np.ndarray, path: str) -> float:
        return round(float((rule.score(x) < rule.at(path)).mean()), 4)

    return {
        "real_turned_away": {p: away(x, p) for p, x in real.items()},
        "turned_away": {name: away(x, "upload") for name, x in none.items()},
        "non_digits": {name: len(x) for name, x in none.items()},
    }


def run(session: ort.InferenceSession, images: np.ndarray, batch: int = 100) -> dict[str, np.ndarray]:
    names = ["lengths", "poses", "reconstructions"]
    outs = [session.run(names, {"image": images[i : i + batch]}) for i in range(0, len(images), batch)]
    return {name: np.concatenate([o[k] for o in outs]) for k, name in enumerate(names)}


def with_third(decoder: ort.InferenceSession, out: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """`out` with the third-longest capsule's redrawing beside the network's two, "redrawings" [N,3,1,S,S]: what the
    pair choice weighs, as the service draws it (service/engine/two_digit.py)."""
    third = third_redrawing(lambda d, p: decoder.run(None, {"digit": d, "pose": p})[0], out["lengths"], out["poses"])
    return out | {"redrawings": np.concatenate([out["reconstructions"], third], 1)}


def chosen(choice: PairChoice | None, out: dict[str, np.ndarray], images: np.ndarray) -> np.ndarray:
    """[N,2] the capsules a pair is read as: the choice's among the three longest, or the two longest without one."""
    order = np.argsort(-out["lengths"], axis=1, kind="stable")
    if choice is None:
        return order[:, :2]
    return np.take_along_axis(order, choice.ranks(choice_signals(out["lengths"], out["redrawings"], images)), 1)


def _right(items: list[dict], out: dict[str, np.ndarray]) -> np.ndarray:
    """[N,3] bool: which of CANDIDATES names both digits of each item."""
    order = np.argsort(-out["lengths"], axis=1, kind="stable")
    return np.array([[{int(order[i, a]), int(order[i, b])} == set(it["labels"]) for a, b in CANDIDATES] for i, it in enumerate(items)])


def _called_two(card_rule: dict, s: np.ndarray, path: str) -> np.ndarray:
    if card_rule.get("rule"):
        return PairRule.from_card(card_rule["rule"]).two(s, path)
    return s[:, 1] >= card_rule["second_min_length"]  # an older card: the second capsule's length alone


def figures(
    items: list[dict], out: dict[str, np.ndarray], two: np.ndarray, present: np.ndarray | None = None, read: np.ndarray | None = None
) -> dict:
    """What a person meets on one path: lone digits called two, pairs called one, pairs with both digits named, and
    (`present`: where the digits rule reads digits at all; None: everywhere) inputs answered with no digit. `read` [N,2]:
    the capsules a pair is read as (`chosen`; None: the two longest)."""
    top2 = np.argsort(-out["lengths"], axis=1)[:, :2]
    read = top2 if read is None else read
    pair = np.array([len(it["labels"]) == 2 for it in items])
    longest_two = np.array([set(t.tolist()) == set(it["labels"]) for t, it in zip(top2, items)])
    named = np.array([set(t.tolist()) == set(it["labels"]) for t, it in zip(read, items)])
    first = np.array([t[0] in it["labels"] for t, it in zip(top2, items)])
    present = np.ones(len(items), bool) if present is None else present
    two, one = two & present, ~two & present
    return {
        "lone": int((~pair).sum()),
        "pairs": int(pair.sum()),
        "lone_called_two": round(float(two[~pair].mean()), 4),
        "lone_read_right": round(float((first & one)[~pair].mean()), 4),
        "pairs_called_one": round(float(one[pair].mean()), 4),
        "pairs_both_named": round(float((named & two)[pair].mean()), 4),
        "pairs_two_longest_right": round(float(longest_two[pair].mean()), 4),  # the paper's measure, whatever the rule says
        "pairs_read_right": round(float(named[pair].mean()), 4),  # the pair as the service reads it, whatever the rule says
        "lone_called_none": round(float((~present)[~pair].mean()), 4),
        "pairs_called_none": round(float((~present)[pair].mean()), 4),
    }


def _present(rule: PairRule | None, s: dict[str, np.ndarray]) -> dict[str, np.ndarray | None]:
    """Where a digits rule (None: none, every input holds digits) reads digits at all, by path, for their
    DIGITS_SIGNAL_NAMES `s`."""
    if rule is None:
        return dict.fromkeys(s)
    return {p: rule.score(x) >= rule.at(p) for p, x in s.items()}


def _apart_figures(
    x: np.ndarray,
    items: list[dict],
    box: int,
    digit_box: int,
    session: ort.InferenceSession,
    decoder: ort.InferenceSession,
    entry: dict,
    choice: PairChoice | None,
    digits: PairRule | None,
) -> dict:
    """The pairs among `items` written apart (`apart`), read by the card's rules (one or two, digits at all) and its
    choice on the path each came by."""
    pairs = [it for it in items if len(it["labels"]) == 2]
    out = {}
    for path, images in apart(x, pairs, box, digit_box).items():
        ran = with_third(decoder, run(session, images))
        sig = signals(ran["lengths"], ran["reconstructions"], images)
        present = _present(digits, {path: with_digits(sig, ran["lengths"], ran["poses"])})[path]
        with warnings.catch_warnings():  # the lone digits' shares of none
            warnings.simplefilter("ignore", RuntimeWarning)
            f = figures(pairs, ran, _called_two(entry["second_digit"], sig, path), present, chosen(choice, ran, images))
        out[path] = {k: v for k, v in f.items() if not k.startswith("lone")}
    return out


def measure(weights: Path, data: Path, n: int = 400, calibrate: bool = False) -> dict:
    card_path = weights / "model-card.json"
    card = json.loads(card_path.read_text())
    if "multimnist" not in card:
        return {"skipped": "the model card has no two-digit network"}
    entry = card["multimnist"]
    box, digit_box = entry["input"]["pair_box"], entry["input"]["mnist_digit_box"]
    session = ort.InferenceSession(str(weights / MULTIMNIST_FILE), providers=["CPUExecutionProvider"])
    decoder = ort.InferenceSession(str(weights / MULTIMNIST_DECODER_FILE), providers=["CPUExecutionProvider"])
    card_choice = PairChoice.from_card(entry["pair_choice"]["rule"]) if "pair_choice" in entry else None
    split = {}
    real_digits: dict[str, dict[str, np.ndarray]] = {}
    none_digits: dict[str, dict[str, np.ndarray]] = {}
    x = np.zeros(0)
    for name, part in (("calibration", "train"), ("held_out", "test")):
        x, y = load_mnist(data, part)  # the test digits stay in x for the traced pairs below
        items = pair_items(x, y, n, SEEDS[name])
        by_path = inputs(x, items, box, digit_box)
        runs = {p: with_third(decoder, run(session, by_path[p])) for p in PATHS}
        sig = {p: signals(runs[p]["lengths"], runs[p]["reconstructions"], by_path[p]) for p in PATHS}
        truth = np.array([len(it["labels"]) == 2 for it in items])
        split[name] = (items, runs, sig, truth, by_path)
        real_digits[name] = {p: with_digits(sig[p], runs[p]["lengths"], runs[p]["poses"]) for p in PATHS}
        if calibrate or (name == "held_out" and "digits" in entry):
            nd = non_digits(name, n // 2, box, digit_box, card["is_digit"]["rule"]["blank_ink_below"])
            none_digits[name] = {k: digits_signals(**run(session, x), images=x) for k, x in nd.items()}
        log.info("%s: %d lone digits and %d pairs through %s", name, n, n, ", ".join(PATHS))
    result: dict = {"model": entry["version"], "per_path": n, "uploads": [f"{f} {s}px" for f, s in UPLOADS]}
    items, runs, sig, truth, by_path = split["held_out"]
    try:
        card_digits = PairRule.from_card(entry["digits"]["rule"], DIGITS_SIGNAL_NAMES) if "digits" in entry else None
        present = _present(card_digits, real_digits["held_out"])
        result["card_rule"] = {
            p: figures(items, runs[p], _called_two(entry["second_digit"], sig[p], p), present[p], chosen(card_choice, runs[p], by_path[p]))
            for p in PATHS
        }
        result["apart"] = _apart_figures(x, items, box, digit_box, session, decoder, entry, card_choice, card_digits)
    except ValueError as e:  # a rule fitted on other signals: calibrating replaces it, anything else must not measure it
        if not calibrate:
            raise
        result["card_rule"] = {"skipped": str(e)}
    traced = traced_pixels(x, items)
    traced_run = run(session, traced)
    traced_sig = signals(traced_run["lengths"], traced_run["reconstructions"], traced)
    if calibrate:
        cal_items, cal_runs, cal_sig, cal_truth, cal_by_path = split["calibration"]
        choice = fit_choice(
            np.concatenate([choice_signals(cal_runs[p]["lengths"], cal_runs[p]["redrawings"], cal_by_path[p])[cal_truth] for p in PATHS]),
            np.concatenate([_right(cal_items, cal_runs[p])[cal_truth] for p in PATHS]),
        )
        rule = fit(np.concatenate([cal_sig[p] for p in PATHS]), np.concatenate([cal_truth] * len(PATHS)))
        rule = choose_thresholds(as_kept(rule), {p: (cal_sig[p], cal_truth) for p in PATHS})
        rule = as_kept(rule)
        digits = digits_rule(real_digits["calibration"], none_digits["calibration"])
        present = _present(digits, real_digits["held_out"])
        held = {p: figures(items, runs[p], rule.two(sig[p], p), present[p], chosen(choice, runs[p], by_path[p])) for p in PATHS}
        result["fitted_rule"] = held
        result["calibration_mistakes"] = {p: mistakes(rule, cal_sig[p], cal_truth, rule.at(p)) for p in PATHS}
        entry["second_digit"] = {
            **{k: v for k, v in entry["second_digit"].items() if k == "second_min_length"},
            "rule": rule.as_card(),
            "held_out": held,
            "measured_on": f"{n} lone MNIST test digits and {n} test pairs through each path (bench/pair_paths.py); fitted on "
            f"as many training digits and pairs",
        }
        digits_held = digits_figures(digits, real_digits["held_out"], none_digits["held_out"])
        entry["digits"] = {
            "rule": digits.as_card(),
            "turned_away_share": TURNED_AWAY,
            "held_out": digits_held,
            "measured_on": f"the held-out inputs above, and up to {n // 2} of each set of non-digits (model/honesty_sets.py's "
            "held-out letters and symbols, clean and photographed, and scribbles; uniform noise) uploaded; fitted on the "
            "calibration split's",
        }
        result["fitted_digits"] = digits_held
        test_pairs = _test_pairs(data, session, decoder, choice)
        entry["pair_choice"] = {
            "rule": choice.as_card(),
            "held_out": {p: {k: held[p][k] for k in ("pairs", "pairs_two_longest_right", "pairs_read_right")} for p in PATHS},
            "test_pairs": test_pairs,
            "measured_on": f"{n} pairs of MNIST test digits through each path, and the 10,000 fixed test pairs sent as pixels; "
            f"fitted on {n} pairs of training digits through each path",
        }
        result["fitted_choice"] = entry["pair_choice"]
        card_path.write_text(json.dumps(card, indent=1) + "\n")
        log.info("wrote the fitted one-or-two rule into %s", card_path)
    if "digits" in entry and "held_out" in none_digits:  # the card's digits-at-all rule, as it holds now
        rule_now = PairRule.from_card(entry["digits"]["rule"], DIGITS_SIGNAL_NAMES)
        result["card_digits"] = digits_figures(rule_now, real_digits["held_out"], none_digits["held_out"])
    # read with the pixels path's threshold (they arrive as pixels do), of the rule the card holds now
    result["traced_pixels"] = figures(items, traced_run, _called_two(entry["second_digit"], traced_sig, "pixels"))
    return result


def _test_pairs(data: Path, session: ort.InferenceSession, decoder: ort.InferenceSession, choice: PairChoice) -> dict:
    """The 10,000 fixed test pairs (the paper's measure), read by the two longest capsules and by `choice`."""
    # torch, which `make bench` has and the service does not: the pairs made as model/export_multimnist.py scores them
    from model.data import load_tensors
    from model.multimnist import TEST_SEED, fixed_test_pairs

    _, _, x, y = load_tensors(data, limit=1)
    pairs = fixed_test_pairs(x, y)
    images, labels = pairs.image.numpy(), pairs.labels.numpy()
    out = with_third(decoder, run(session, images, batch=250))
    items = [{"labels": [int(a), int(b)]} for a, b in labels]
    right = _right(items, out)
    read = chosen(choice, out, images)
    return {
        "pairs": len(items),
        "pair_seed": TEST_SEED,
        "two_longest_right": round(float(right[:, 0].mean()), 4),
        "read_right": round(float(np.mean([set(r.tolist()) == set(it["labels"]) for r, it in zip(read, items)])), 4),
    }


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--weights", type=Path, default=Path("weights"), help="the directory holding multimnist.onnx and the card")
    p.add_argument("--data", type=Path, default=Path(MNIST_DIR), help="MNIST's IDX files")
    p.add_argument("--n", type=int, default=400, help="lone digits, and as many pairs, per split and path")
    p.add_argument("--calibrate", action="store_true", help="fit the rule on the training digits and write it into the card")
    args = p.parse_args(argv)
    print(json.dumps(measure(args.weights, args.data, args.n, args.calibrate), indent=1))


if __name__ == "__main__":
    main()
