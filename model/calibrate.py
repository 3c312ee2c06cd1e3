"""Calibrate the service's `is_digit` rule on MNIST and write it into the model card.

Why a rule at all: a capsule network always has a longest capsule, so a letter, a scribble or noise would be
answered as some digit. What capsules offer instead of a bare score (the paper's Figure 3; Frosst, Sabour & Hinton's
DARCCC, 2018): the winning capsule's pose can be decoded back into an image, and a real digit is redrawn well by its
own capsule while an input the network has never seen is not. The rule has two thresholds, each the `--quantile`
of the MNIST training digits (so about twice that share of real digits is flagged): the winning capsule's length
at least `min_length`, and its counterfactual reconstruction error at most `max_recon_error`. Blank input (less than
`--blank-ink` of total ink in the 28x28 input) is neither.

`python -m model.calibrate` runs the committed ONNX files through onnxruntime and rewrites weights/model-card.json's
`is_digit` section (the ONNX files are not touched, so their sha256 in the card stays right).
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

import numpy as np
from tqdm import tqdm

from model import DECODER_FILE, FP32_FILE, MNIST_DIR
from model.cli import log_to_console
from model.data import load_mnist

log = logging.getLogger("capsnet.calibrate")

DEFINITION = (
    "recon_errors[k] = sum over the 28x28 input x of (decoder(k, v_k) - x)^2 / max(sum of x^2, 1), v_k capsule k's own pose; "
    "blank = sum of x < blank_ink_below; is_digit = not blank and length[winner] >= min_length and "
    "recon_errors[winner] <= max_recon_error, winner = the longest capsule"
)


def recon_error(images: np.ndarray, recon: np.ndarray) -> np.ndarray:
    """images [N,S,S], recon [N,K,S,S] -> [N,K], as DEFINITION states (the service computes it in service/engine/local.py)."""
    ink = np.maximum(np.square(images).sum((-2, -1)), 1.0)
    return np.square(recon - images[:, None]).sum((-2, -1)) / ink[:, None]


def features(weights: Path, model_file: str, images: np.ndarray, batch: int = 250) -> tuple[np.ndarray, np.ndarray]:
    """float32 images [N,S,S] -> winner lengths [N] and the winner's counterfactual reconstruction errors [N]."""
    import onnxruntime as ort

    capsnet = ort.InferenceSession(str(weights / model_file), providers=["CPUExecutionProvider"])
    decoder = ort.InferenceSession(str(weights / DECODER_FILE), providers=["CPUExecutionProvider"])
    lengths, errors = [], []
    for i in tqdm(range(0, len(images), batch), desc=model_file, leave=False):
        x = images[i : i + batch]
        length, poses = capsnet.run(["lengths", "poses"], {"image": x[:, None]})
        n, k, dim = poses.shape
        recon = decoder.run(["reconstruction"], {"digit": np.tile(np.arange(k, dtype=np.int64), n), "pose": poses.reshape(n * k, dim)})[0]
        err = recon_error(x, recon.reshape(n, k, *x.shape[-2:]))
        win = length.argmax(1)
        lengths.append(length[np.arange(n), win])
        errors.append(err[np.arange(n), win])
    return np.concatenate(lengths), np.concatenate(errors)


def flagged(lengths: np.ndarray, errors: np.ndarray, rule: dict) -> np.ndarray:
    return (lengths < rule["min_length"]) | (errors > rule["max_recon_error"])


def calibrate(weights: Path, data: Path, train_images: int, quantile: float, blank_ink: float) -> dict:
    card = json.loads((weights / "model-card.json").read_text())
    files = [FP32_FILE] + ([card["int8"]["file"]] if card.get("int8", {}).get("file") else [])
    train, _ = load_mnist(data, "train")
    test, test_labels = load_mnist(data, "test")
    train = (train[np.random.default_rng(0).permutation(len(train))[:train_images]] / np.float32(255.0)).astype(np.float32)
    test = (test / np.float32(255.0)).astype(np.float32)
    # Thresholds from the FP32 file: the INT8 file's features differ from it in the third decimal, checked below.
    tl, te = features(weights, files[0], train)
    rule = {
        "blank_ink_below": blank_ink,
        "min_length": round(float(np.quantile(tl, quantile)), 4),
        "max_recon_error": round(float(np.quantile(te, 1.0 - quantile)), 4),
    }
    report = {"train_images": len(train), "quantile": quantile, "train_flagged": round(float(flagged(tl, te, rule).mean()), 5), "test": {}}
    for f in files:
        ln, er = features(weights, f, test)
        flags = flagged(ln, er, rule)
        report["test"][f] = {
            "flagged": round(float(flags.mean()), 5),
            "flagged_count": int(flags.sum()),
            "flagged_per_class": [round(float(flags[test_labels == d].mean()), 5) for d in range(10)],
        }
        log.info("%s: %.2f%% of the 10k MNIST test digits flagged as not a digit", f, 100 * flags.mean())
    return {"rule": rule, "definition": DEFINITION, "calibration": report}


def main(argv: list[str] | None = None) -> None:
    log_to_console()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--data", default=MNIST_DIR, help="directory holding MNIST's IDX files")
    p.add_argument("--weights", default="weights", help="directory holding the ONNX files and model-card.json (rewritten)")
    p.add_argument("--train-images", type=int, default=20000, help="training digits the thresholds are taken from")
    p.add_argument(
        "--quantile", type=float, default=0.005, help="share of training digits below the length threshold (and above the error one)"
    )
    p.add_argument("--blank-ink", type=float, default=1.0, help="total ink (sum of the 28x28 input) below which an input is blank")
    args = p.parse_args(argv)
    weights = Path(args.weights)
    section = calibrate(weights, Path(args.data), args.train_images, args.quantile, args.blank_ink)
    card_path = weights / "model-card.json"
    card = json.loads(card_path.read_text())
    card["is_digit"] = section
    card_path.write_text(json.dumps(card, indent=1) + "\n")
    print(json.dumps(section["rule"]))


if __name__ == "__main__":
    main()
