"""INT8 capsnet: static QDQ quantisation of the two convolutions, calibrated on MNIST training images.

Only Conv is quantised: the convolutions are ~98% of the multiply-adds, while routing (softmax,
agreement, squash) works on small, sign-sensitive values where 8 bits would cost accuracy for no speed.
`python -m model.quantize` writes weights/capsnet-int8.onnx and records its measured accuracy and
speed-up in the model card; the service serves it when asked (CAPSNET_PRECISION=int8) or, by default
(auto), when the card says it met the bars (accuracy loss <= 0.05 points, faster, no non-finite output).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import tempfile
from pathlib import Path

import numpy as np

from model import FP32_FILE, INT8_FILE, MNIST_DIR
from model.cli import log_to_console
from model.machine import timed

log = logging.getLogger("capsnet.quantize")

MAX_ACCURACY_LOSS_POINTS = 0.05  # percentage points on the 10k test set: 5 more errors at most


class _Calibration:
    """onnxruntime's CalibrationDataReader protocol over uint8 images."""

    def __init__(self, images: np.ndarray, batch: int = 32) -> None:
        x = (images.astype(np.float32) / 255.0)[:, None]
        self._it = iter([{"image": x[i : i + batch]} for i in range(0, len(x), batch)])

    def get_next(self) -> dict | None:
        return next(self._it, None)


def quantize(fp32: Path, int8: Path, calibration: np.ndarray) -> None:
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    with tempfile.TemporaryDirectory() as tmp:
        pre = Path(tmp) / "pre.onnx"
        quant_pre_process(str(fp32), str(pre))
        quantize_static(
            str(pre),
            str(int8),
            _Calibration(calibration),
            quant_format=QuantFormat.QDQ,
            op_types_to_quantize=["Conv"],
            activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8,
            per_channel=True,
        )


def images_per_second(path: Path, batch: int = 32, seconds: float = 2.0) -> float:
    import onnxruntime as ort

    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).random((batch, 1, 28, 28), dtype=np.float32)
    return batch * timed(lambda: sess.run(None, {"image": x}), seconds, warmup=1, min_calls=3)[1]


def run(weights: Path, data: Path, calibration_images: int = 512) -> dict:
    """Quantise, measure accuracy on the 10k test set and speed against FP32, and record both in the card."""
    from model.data import load_mnist
    from model.evaluate import predict_onnx, summarize

    fp32, int8 = weights / FP32_FILE, weights / INT8_FILE
    train_x, _ = load_mnist(data, "train")
    quantize(fp32, int8, train_x[:calibration_images])
    test_x, test_y = load_mnist(data, "test")
    pred8 = predict_onnx(int8, test_x)
    acc8 = summarize(pred8, test_y)
    nonfinite = int((pred8 == -1).sum())
    card_path = weights / "model-card.json"
    card = json.loads(card_path.read_text())
    ref = card["test"] if card.get("test") else summarize(predict_onnx(fp32, test_x), test_y)
    acc32 = ref["accuracy"]
    speed32, speed8 = images_per_second(fp32), images_per_second(int8)
    extra_errors = acc8["errors"] - ref["errors"]  # compared in whole errors, not floats
    loss_points = 100.0 * extra_errors / acc8["count"]
    result = {
        "file": int8.name,
        "sha256": hashlib.sha256(int8.read_bytes()).hexdigest(),
        "bytes": int8.stat().st_size,
        "method": f"static QDQ, Conv only, per-channel int8 weights, uint8 activations, {calibration_images} MNIST training images",
        "test": {k: acc8[k] for k in ("accuracy", "errors", "count", "per_class")},
        "accuracy_loss_points": round(loss_points, 3),
        "extra_errors": extra_errors,
        "nonfinite_outputs": nonfinite,
        "images_per_s_batch32": {"fp32": round(speed32, 1), "int8": round(speed8, 1)},
        "speedup_batch32": round(speed8 / speed32, 2),
        "meets_bars": bool(extra_errors * 100 <= MAX_ACCURACY_LOSS_POINTS * acc8["count"] and speed8 > speed32 and nonfinite == 0),
    }
    card["int8"] = result
    card["files"][int8.name] = {"sha256": result["sha256"], "bytes": result["bytes"]}
    card_path.write_text(json.dumps(card, indent=1) + "\n")
    log.info(
        "int8: accuracy %.4f (fp32 %.4f), %.2fx faster at batch 32; meets the bars: %s",
        acc8["accuracy"],
        acc32,
        result["speedup_batch32"],
        result["meets_bars"],
    )
    return result


def main(argv: list[str] | None = None) -> None:
    log_to_console()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--weights", type=Path, default=Path("weights"), help="holds capsnet.onnx and the model card")
    p.add_argument("--data", type=Path, default=Path(MNIST_DIR), help="MNIST directory (calibration and test)")
    p.add_argument("--calibration-images", type=int, default=512, help="training images used to calibrate activation ranges")
    args = p.parse_args(argv)
    run(args.weights, args.data, args.calibration_images)


if __name__ == "__main__":
    main()
