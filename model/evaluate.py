"""Accuracy, per-class accuracy and confusion matrix on MNIST's 10k test set.

`python -m model.evaluate --onnx weights/capsnet.onnx` measures the exported file through
onnxruntime (the figure the model card states); `--checkpoint checkpoints/best.pt` measures PyTorch.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

import numpy as np

from model import MNIST_DIR
from model.cli import log_to_console
from model.data import load_mnist

log = logging.getLogger("capsnet.evaluate")


def summarize(pred: np.ndarray, labels: np.ndarray, num_classes: int = 10) -> dict:
    """Overall and per-class accuracy and the confusion matrix (rows: true digit, columns: predicted)."""
    labels = labels.astype(np.int64)
    confusion = np.zeros((num_classes, num_classes), dtype=np.int64)
    valid = pred >= 0  # -1: non-finite output, an error that has no column
    np.add.at(confusion, (labels[valid], pred[valid].astype(np.int64)), 1)
    per_class = confusion.diagonal() / np.maximum(np.bincount(labels, minlength=num_classes), 1)
    return {
        "accuracy": float((pred == labels).mean()),
        "errors": int((pred != labels).sum()),
        "count": int(len(labels)),
        "per_class": [round(float(a), 6) for a in per_class],
        "confusion": confusion.tolist(),
    }


def predict_onnx(onnx_path: str | Path, images: np.ndarray, batch_size: int = 250, threads: int = 0) -> np.ndarray:
    """Predicted digits for uint8 [N,28,28] images through onnxruntime's CPU provider.

    A row whose lengths are not all finite is predicted as -1, so it counts as an error (argmax would
    quietly call it a 0) and `(pred == -1).sum()` says how many there were."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    sess = ort.InferenceSession(str(onnx_path), opts, providers=["CPUExecutionProvider"])
    x = (images.astype(np.float32) / 255.0)[:, None]
    preds = []
    for i in range(0, len(x), batch_size):
        lengths = sess.run(["lengths"], {"image": x[i : i + batch_size]})[0]
        preds.append(np.where(np.isfinite(lengths).all(-1), lengths.argmax(-1), -1))
    pred = np.concatenate(preds)
    if (pred == -1).any():
        log.warning("%s: %d of %d images gave non-finite outputs", onnx_path, int((pred == -1).sum()), len(pred))
    return pred


def predict_checkpoint(path: str | Path, images: np.ndarray) -> np.ndarray:
    import torch

    from model.capsnet import CapsNet
    from model.data import to_tensor
    from model.train import checkpoint_weights, evaluate_model

    model = CapsNet()
    model.load_state_dict(checkpoint_weights(torch.load(path, map_location="cpu", weights_only=False)))
    x = to_tensor(images)
    _, pred = evaluate_model(model, x, torch.zeros(len(x), dtype=torch.long))
    return pred


def main(argv: list[str] | None = None) -> None:
    log_to_console()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--data", default=MNIST_DIR, help="directory holding MNIST's IDX files")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--onnx", default="weights/capsnet.onnx", help="exported model, run through onnxruntime")
    src.add_argument("--checkpoint", help="a training checkpoint (.pt), run through PyTorch")
    p.add_argument("--json", help="also write the result here")
    args = p.parse_args(argv)
    images, labels = load_mnist(args.data, "test")
    pred = predict_checkpoint(args.checkpoint, images) if args.checkpoint else predict_onnx(args.onnx, images)
    result = summarize(pred, labels)
    log.info("test accuracy %.4f (%d errors of %d)", result["accuracy"], result["errors"], result["count"])
    for d, a in enumerate(result["per_class"]):
        log.info("  digit %d: %.4f", d, a)
    print(json.dumps({k: result[k] for k in ("accuracy", "errors", "per_class")}))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
