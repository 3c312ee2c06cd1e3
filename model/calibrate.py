"""Fit the service's `is_digit` rule (model/digit_rule.py) and write it, with what it was measured to do, into the
model card.

Why fitted on more than MNIST: a rule calibrated on digits alone says how digits look to the network and nothing about
what is not one. So the rule is fitted on both sides, all from the calibration split (model/honesty_sets.py): MNIST
training digits as pixels and as people send them (photographed, tightly cropped, low-resolution scans blown up), against
letters and symbols of 23 font families, scribbles and blank paper under lamps and shadows. Its threshold is the
`--quantile` of the MNIST training digits' scores: 0.002, at which the calibration split's low-resolution digits are
turned away 5% of the time. Training digits are easier for the network than unseen ones, so a larger share of the test
digits is turned away (measured on the held-out split, and written into the card).

The sets reach this command as the service's preprocessing made them (28x28, what the network sees), written by
`python -m bench.honesty --save-inputs` (`make calibrate` runs both): this package never imports the service. The
held-out split (other seeds, MNIST's test digits, 11 font families never seen here) is scored the same way, and its
figures go into the card beside the rule.

`python -m model.calibrate` runs the committed ONNX files through onnxruntime and rewrites weights/model-card.json's
`is_digit` section (the ONNX files are not touched, so their sha256 in the card stays right).
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from model import DECODER_FILE, FP32_FILE, MNIST_DIR
from model.cli import log_to_console
from model.data import load_mnist
from model.digit_rule import GROUPS, SIGNAL_NAMES, Scorer, auc, judge, recon_error, signals
from model.honesty_sets import SETS

log = logging.getLogger("capsnet.calibrate")

DEFINITION = (
    "recon_errors[k] = sum over the 28x28 input x of (decoder(k, v_k) - x)^2 / max(sum of x^2, 1), v_k capsule k's own pose; "
    "blank = sum of x < blank_ink_below; is_digit = not blank and score(signals(lengths, recon_errors, poses)) >= threshold, "
    "signals and score as model/digit_rule.py defines them (a tanh layer on the standardised signals)"
)


def capsule_outputs(weights: Path, model_file: str, images: np.ndarray, batch: int = 250) -> tuple[np.ndarray, ...]:
    """float32 images [N,S,S] -> lengths [N,10], counterfactual reconstruction errors [N,10], poses [N,10,16]."""
    import onnxruntime as ort

    capsnet = ort.InferenceSession(str(weights / model_file), providers=["CPUExecutionProvider"])
    decoder = ort.InferenceSession(str(weights / DECODER_FILE), providers=["CPUExecutionProvider"])
    lengths, errors, poses = [], [], []
    for i in tqdm(range(0, len(images), batch), desc=model_file, leave=False):
        x = images[i : i + batch]
        length, pose = capsnet.run(["lengths", "poses"], {"image": x[:, None]})
        n, k, dim = pose.shape
        recon = decoder.run(["reconstruction"], {"digit": np.tile(np.arange(k, dtype=np.int64), n), "pose": pose.reshape(n * k, dim)})[0]
        lengths.append(length)
        errors.append(recon_error(x, recon.reshape(n, k, *x.shape[-2:])))
        poses.append(pose)
    if not lengths:
        return np.zeros((0, 10), np.float32), np.zeros((0, 10), np.float32), np.zeros((0, 10, 16), np.float32)
    return np.concatenate(lengths), np.concatenate(errors), np.concatenate(poses)


def read_sets(path: Path) -> dict[str, dict[str, np.ndarray]]:
    """bench.honesty's --save-inputs file -> per set its 28x28 `inputs` (float32) and, for digit sets, `labels`."""
    stored = np.load(path)
    sets: dict[str, dict[str, np.ndarray]] = {}
    for key in stored.files:
        name, part = key.split("/")
        sets.setdefault(name, {})[part] = stored[key].astype(np.float32) if part == "inputs" else stored[key]
    return sets


def fit(z: np.ndarray, is_digit: np.ndarray, hidden: int, seed: int = 0) -> dict[str, np.ndarray]:
    """The scorer's weights by full-batch L-BFGS on the logistic loss, both classes weighed equally."""
    torch.manual_seed(seed)
    x, y = torch.tensor(z, dtype=torch.float32), torch.tensor(is_digit, dtype=torch.float32)
    net = torch.nn.Sequential(torch.nn.Linear(z.shape[1], hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, 1))
    opt = torch.optim.LBFGS(net.parameters(), max_iter=500, line_search_fn="strong_wolfe")
    balance = torch.tensor(float((1 - is_digit).sum() / max(is_digit.sum(), 1)))

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(net(x).squeeze(1), y, pos_weight=balance)
        loss = loss + 1e-4 * sum((p**2).sum() for p in net.parameters())
        loss.backward()
        return loss

    opt.step(closure)
    first, last = net[0], net[2]
    return {
        "hidden_weight": first.weight.detach().numpy(),
        "hidden_bias": first.bias.detach().numpy(),
        "out_weight": last.weight.detach().numpy()[0],
        "out_bias": float(last.bias.detach().numpy()[0]),
    }


def measure(scorer: Scorer, blank_ink: float, weights: Path, model_file: str, sets: dict[str, dict[str, np.ndarray]]) -> dict:
    """Per held-out set: answered blank, flagged (not blank, not a digit), read right; the score's ROC AUC, real digits
    against everything that is not one, on the inputs not answered blank."""
    rows, digit_scores, other_scores = {}, [], []
    for name, part in sets.items():
        images = part["inputs"]
        lengths, errors, poses = capsule_outputs(weights, model_file, images)
        blank, digit, why = judge(scorer, blank_ink, images[:, None], lengths, errors, poses)
        kept = ~blank
        score = scorer.score(signals(lengths[kept], errors[kept], poses[kept]))
        (digit_scores if SETS[name].kind == "digit" else other_scores).append(score)
        row = {"n": len(images), "blank": round(float(blank.mean()), 4), "flagged": round(float((~blank & ~digit).mean()), 4)}
        reasons = [w[0] for w in why if w is not None and w[0] != "blank"]
        row["why"] = {g: reasons.count(g) for g in GROUPS if reasons.count(g)}
        if "labels" in part:
            row["read_right"] = round(float((lengths.argmax(1) == part["labels"]).mean()), 4)
        rows[name] = row
    separation = auc(np.concatenate(digit_scores), np.concatenate(other_scores))
    return {"auc": None if separation is None else round(separation, 4), "sets": rows}


def calibrate(
    weights: Path, data: Path, calibration: Path, held_out: Path | None, train_images: int, quantile: float, hidden: int, blank_ink: float
) -> dict:
    card = json.loads((weights / "model-card.json").read_text())
    files = [FP32_FILE] + ([card["int8"]["file"]] if card.get("int8", {}).get("file") else [])
    train, _ = load_mnist(data, "train")
    train = (train[np.random.default_rng(0).permutation(len(train))[:train_images]] / np.float32(255.0)).astype(np.float32)
    # Fitted on the FP32 file's outputs: the INT8 file's differ from them in the third decimal, measured below.
    sides: list[tuple[np.ndarray, int]] = [(signals(*capsule_outputs(weights, files[0], train)), 1)]
    for name, part in read_sets(calibration).items():
        images = part["inputs"]
        kept = images.reshape(len(images), -1).sum(1) >= blank_ink  # what the rule sees: blank input never reaches it
        sides.append((signals(*capsule_outputs(weights, files[0], images[kept])), int(SETS[name].kind == "digit")))
    s = np.concatenate([x for x, _ in sides])
    y = np.concatenate([np.full(len(x), label, np.float32) for x, label in sides])
    digits = s[y == 1]
    mean, scale = digits.mean(0), digits.std(0) + 1e-6
    params = fit((s - mean) / scale, y, hidden)
    scorer = Scorer(mean=mean, scale=scale, threshold=0.0, **params)
    threshold = float(np.quantile(scorer.score(sides[0][0]), quantile))
    scorer = Scorer(mean=mean, scale=scale, threshold=threshold, **params)
    rule = {
        "blank_ink_below": blank_ink,
        "signals": list(SIGNAL_NAMES),
        "mean": np.round(mean, 6).tolist(),
        "scale": np.round(scale, 6).tolist(),
        "hidden_weight": np.round(params["hidden_weight"], 6).tolist(),
        "hidden_bias": np.round(params["hidden_bias"], 6).tolist(),
        "out_weight": np.round(params["out_weight"], 6).tolist(),
        "out_bias": round(params["out_bias"], 6),
        "threshold": round(threshold, 6),
    }
    rounded = Scorer.from_rule(rule)  # what the service will run: the card's rounded figures
    report: dict = {
        "train_images": len(train),
        "quantile": quantile,
        "hidden_units": hidden,
        "fitted_on": {"digits": int(y.sum()), "not_digits": int((1 - y).sum())},
        "train_flagged": round(float((rounded.score(sides[0][0]) < rounded.threshold).mean()), 5),
    }
    if held_out is not None:
        sets = read_sets(held_out)
        report["held_out"] = {f: measure(rounded, blank_ink, weights, f, sets) for f in files}
        for f, m in report["held_out"].items():
            log.info("%s: AUC %.4f; flagged %s", f, m["auc"], {k: v["flagged"] for k, v in m["sets"].items()})
    return {"rule": rule, "definition": DEFINITION, "calibration": report}


def main(argv: list[str] | None = None) -> None:
    log_to_console()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--data", default=MNIST_DIR, help="directory holding MNIST's IDX files")
    p.add_argument("--weights", default="weights", help="directory holding the ONNX files and model-card.json (rewritten)")
    p.add_argument("--sets", required=True, help="the calibration split's sets as `python -m bench.honesty --save-inputs` wrote them")
    p.add_argument("--held-out", default=None, help="the held-out split's, scored for the card (not used to fit)")
    p.add_argument("--train-images", type=int, default=20000, help="MNIST training digits, as pixels, among the digits fitted on")
    p.add_argument("--quantile", type=float, default=0.002, help="share of those training digits turned away (module docstring)")
    p.add_argument("--hidden", type=int, default=16, help="tanh units of the scorer")
    p.add_argument("--blank-ink", type=float, default=1.0, help="total ink (sum of the 28x28 input) below which an input is blank")
    args = p.parse_args(argv)
    weights = Path(args.weights)
    held = Path(args.held_out) if args.held_out else None
    section = calibrate(weights, Path(args.data), Path(args.sets), held, args.train_images, args.quantile, args.hidden, args.blank_ink)
    card_path = weights / "model-card.json"
    card = json.loads(card_path.read_text())
    card["is_digit"] = section
    card_path.write_text(json.dumps(card, indent=1) + "\n")
    log.info("is_digit rule written to %s (threshold %.4f)", card_path, section["rule"]["threshold"])


if __name__ == "__main__":
    main()
