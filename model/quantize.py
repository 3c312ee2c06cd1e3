"""INT8 capsnet: static QDQ quantisation of the two convolutions, calibrated on MNIST training images; and an INT8
decoder for the counterfactual redraws.

Only Conv is quantised in capsnet: the convolutions are ~98% of the multiply-adds, while routing (softmax,
agreement, squash) works on small, sign-sensitive values where 8 bits would cost accuracy for no speed.
`python -m model.quantize` writes weights/capsnet-int8.onnx and records its measured accuracy and
speed-up in the model card; the service serves it when asked (CAPSNET_PRECISION=int8) or, by default
(auto), when the card says it met the bars (accuracy loss <= 0.05 points, faster, no non-finite output).

The decoder is quantised apart (decoder-int8.onnx, the card's `int8.decoder`): beside every INT8 answer the service
redraws the nine capsules that did not win, to tell how well each explains the input (`recon_errors`, and from them
`is_digit`). The page's own decoder and the pictures people ask for by pose (/reconstruct, /perturb) stay decoder.onnx.
Its bars: faster on a lone request's nine redraws, and no more than 0.1% of the 10,000 test digits' `is_digit` verdicts
changed under the card's rule.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import tempfile
from pathlib import Path

import numpy as np

from model import DECODER_FILE, DECODER_INT8_FILE, FP32_FILE, INT8_FILE, MNIST_DIR
from model.cli import log_to_console
from model.machine import timed

log = logging.getLogger("capsnet.quantize")

MAX_ACCURACY_LOSS_POINTS = 0.05  # percentage points on the 10k test set: 5 more errors at most
DECODER_CALIBRATION_IMAGES = 4096  # training digits whose capsules set the decoder's ranges: 40,960 poses
MAX_CHANGED_VERDICTS = 0.001  # share of the test digits whose is_digit verdict the INT8 decoder may turn: 10 of 10,000


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


class _Poses:
    """onnxruntime's CalibrationDataReader protocol over capsules' poses [N,10,16]: every capsule's own pose, as the
    service redraws them."""

    def __init__(self, poses: np.ndarray, images_a_batch: int = 64) -> None:
        n, k, dim = poses.shape
        digits, flat = np.tile(np.arange(k, dtype=np.int64), n), poses.reshape(n * k, dim).astype(np.float32)
        rows = images_a_batch * k
        # whole batches only: onnxruntime's histogram collector stacks every batch's values into one array
        self._it = iter([{"digit": digits[i : i + rows], "pose": flat[i : i + rows]} for i in range(0, len(flat) - rows + 1, rows)])

    def get_next(self) -> dict | None:
        return next(self._it, None)


def quantize_decoder(fp32: Path, int8: Path, poses: np.ndarray) -> None:
    """Static QDQ quantisation of the decoder's three fully connected layers: per-channel int8 weights, uint8
    activations in ranges calibrated on `poses` [N,10,16] (training digits' capsules). Static, not dynamic: ranges
    measured per call would make one image's redraws depend on the others batched with it, and so its answer on the
    load. In int8 the nine redraws of a lone request cost a fifth of their fp32 time on one thread (BENCHMARKS.md's
    notes)."""
    import onnx
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static

    model = onnx.load(str(fp32))
    # The quantiser's shape inference refuses the exporter's value_info of the Gemm weights (it transposes them);
    # value_info is only a hint to it, so it goes.
    del model.graph.value_info[:]
    with tempfile.TemporaryDirectory() as tmp:
        plain = Path(tmp) / DECODER_FILE
        onnx.save(model, str(plain))
        quantize_static(
            str(plain),
            str(int8),
            _Poses(poses),
            quant_format=QuantFormat.QDQ,
            op_types_to_quantize=["Gemm"],
            activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8,
            per_channel=True,
            # each range the middle 99.99% of what the calibration capsules give: recon_errors nearer decoder.onnx's than
            # with the extremes (3,000 test digits: largest difference 0.13 against 0.22, median 0.011 against 0.018)
            calibrate_method=CalibrationMethod.Percentile,
            extra_options={"CalibPercentile": 99.99},
        )


def _redraws_per_second(path: Path, rows: int = 9, seconds: float = 2.0) -> float:
    """A lone /predict's counterfactuals: the decoder on nine capsules' poses, one call."""
    import onnxruntime as ort

    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feed = {"digit": np.arange(rows, dtype=np.int64) % 10, "pose": np.random.default_rng(0).normal(0, 0.2, (rows, 16)).astype(np.float32)}
    return timed(lambda: sess.run(None, feed), seconds, warmup=3, min_calls=20)[1]


def decoder_parity(weights: Path, decoder_int8: Path, images: np.ndarray, card: dict, batch: int = 500) -> dict:
    """The INT8 decoder against decoder.onnx on what the service redraws: every capsule of each image [N,28,28] (float32
    in [0,1]) as capsnet-int8.onnx (the file served beside it) reads it, the winner's redraw the graph's own in both, as
    the service does. Pixels, recon_errors, and the is_digit verdicts under the card's rule when it has one."""
    import onnxruntime as ort

    from model.digit_rule import Scorer, judge, recon_error

    def session(path: Path) -> ort.InferenceSession:
        return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])

    capsnet, decoders = session(weights / INT8_FILE), (session(weights / DECODER_FILE), session(decoder_int8))
    rule = card.get("is_digit", {}).get("rule")
    scorer = Scorer.from_rule(rule) if rule is not None else None
    pixel, error, flips, nonfinite = [], [], 0, 0
    for i in range(0, len(images), batch):
        x = images[i : i + batch]
        lengths, poses, recon = capsnet.run(["lengths", "poses", "reconstruction"], {"image": x[:, None]})
        n, k, dim = poses.shape
        feed = {"digit": np.tile(np.arange(k, dtype=np.int64), n), "pose": poses.reshape(n * k, dim)}
        redraws = [d.run(None, feed)[0].reshape(n, k, *x.shape[-2:]) for d in decoders]
        for r in redraws:
            r[np.arange(n), lengths.argmax(1)] = recon[:, 0]
        nonfinite += int((~np.isfinite(redraws[1])).sum())
        errors = [recon_error(x, r) for r in redraws]
        pixel.append(np.abs(redraws[1] - redraws[0]).reshape(n, -1).max(1))
        error.append(np.abs(errors[1] - errors[0]).max(1))
        if rule is not None:
            verdicts = [judge(scorer, rule["blank_ink_below"], x[:, None], lengths, e, poses)[1] for e in errors]
            flips += int((verdicts[0] != verdicts[1]).sum())
    pixel_max, error_max = np.concatenate(pixel), np.concatenate(error)
    return {
        "inputs": len(images),
        "pixel_max_abs": round(float(pixel_max.max()), 4),
        "pixel_max_abs_median": round(float(np.median(pixel_max)), 4),
        "recon_error_max_abs": round(float(error_max.max()), 4),
        "recon_error_max_abs_median": round(float(np.median(error_max)), 4),
        "is_digit_changed": flips if rule is not None else None,
        "nonfinite_outputs": nonfinite,
    }


def run_decoder(weights: Path, data: Path, calibration_images: int = DECODER_CALIBRATION_IMAGES, held_out: Path | None = None) -> dict:
    """Quantise the decoder on the capsules of `calibration_images` training digits as capsnet-int8.onnx reads them,
    measure it against decoder.onnx (on the test digits; on the `is_digit` rule's held-out sets too when given, as
    `python -m bench.honesty --save-inputs` wrote them), and record it in the card's `int8.decoder`."""
    import onnxruntime as ort

    from model.data import load_mnist

    int8 = weights / DECODER_INT8_FILE
    train_x = load_mnist(data, "train")[0][:calibration_images, None].astype(np.float32) / 255.0
    capsnet = ort.InferenceSession(str(weights / INT8_FILE), providers=["CPUExecutionProvider"])
    quantize_decoder(weights / DECODER_FILE, int8, capsnet.run(["poses"], {"image": train_x})[0])
    test_x = load_mnist(data, "test")[0]
    card_path = weights / "model-card.json"
    card = json.loads(card_path.read_text())
    parity = decoder_parity(weights, int8, test_x.astype(np.float32) / 255.0, card)
    sets = {}
    if held_out is not None:
        from model.calibrate import read_sets

        sets = {name: decoder_parity(weights, int8, part["inputs"], card) for name, part in read_sets(held_out).items()}
    speed32, speed8 = _redraws_per_second(weights / DECODER_FILE), _redraws_per_second(int8)
    changed = parity["is_digit_changed"]
    result = {
        "file": int8.name,
        "sha256": hashlib.sha256(int8.read_bytes()).hexdigest(),
        "bytes": int8.stat().st_size,
        "method": "static QDQ, the three fully connected layers, per-channel int8 weights, uint8 activations, ranges the "
        f"middle 99.99% of the capsules of {calibration_images} MNIST training images",
        "parity": parity,
        **({"held_out_sets": {name: {k: m[k] for k in ("inputs", "is_digit_changed")} for name, m in sets.items()}} if sets else {}),
        "nine_redraws_per_s": {"fp32": round(speed32, 1), "int8": round(speed8, 1)},
        "speedup_nine_redraws": round(speed8 / speed32, 2),
        "meets_bars": bool(
            changed is not None
            and changed <= MAX_CHANGED_VERDICTS * parity["inputs"]
            and speed8 > speed32
            and parity["nonfinite_outputs"] == 0
        ),
    }
    card.setdefault("int8", {})["decoder"] = result
    card["files"][int8.name] = {"sha256": result["sha256"], "bytes": result["bytes"]}
    card_path.write_text(json.dumps(card, indent=1) + "\n")
    log.info(
        "int8 decoder: %s is_digit verdicts of %d test digits changed, recon_errors within %.4f, %.2fx faster on nine "
        "redraws; meets the bars: %s",
        changed,
        parity["inputs"],
        parity["recon_error_max_abs"],
        result["speedup_nine_redraws"],
        result["meets_bars"],
    )
    return result


def images_per_second(path: Path, batch: int = 32, seconds: float = 2.0) -> float:
    import onnxruntime as ort

    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).random((batch, 1, 28, 28), dtype=np.float32)
    return batch * timed(lambda: sess.run(None, {"image": x}), seconds, warmup=1, min_calls=3)[1]


def run(weights: Path, data: Path, calibration_images: int = 512, held_out: Path | None = None) -> dict:
    """Quantise, measure accuracy on the 10k test set and speed against FP32, and record both in the card; then the
    decoder (run_decoder)."""
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
    card["int8"] = result  # its decoder entry is measured again below
    card["files"][int8.name] = {"sha256": result["sha256"], "bytes": result["bytes"]}
    card_path.write_text(json.dumps(card, indent=1) + "\n")
    log.info(
        "int8: accuracy %.4f (fp32 %.4f), %.2fx faster at batch 32; meets the bars: %s",
        acc8["accuracy"],
        acc32,
        result["speedup_batch32"],
        result["meets_bars"],
    )
    result["decoder"] = run_decoder(weights, data, held_out=held_out)
    return result


def main(argv: list[str] | None = None) -> None:
    log_to_console()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--weights", type=Path, default=Path("weights"), help="holds capsnet.onnx and the model card")
    p.add_argument("--data", type=Path, default=Path(MNIST_DIR), help="MNIST directory (calibration and test)")
    p.add_argument(
        "--calibration-images",
        type=int,
        default=512,
        help="training images used to calibrate capsnet's activation ranges (the decoder's: 4096)",
    )
    p.add_argument("--decoder-only", action="store_true", help="quantise the decoder alone, keeping capsnet-int8.onnx as it is")
    p.add_argument(
        "--held-out",
        type=Path,
        default=None,
        help="the is_digit held-out sets (bench.honesty --save-inputs): verdicts kept there too",
    )
    args = p.parse_args(argv)
    if args.decoder_only:
        run_decoder(args.weights, args.data, held_out=args.held_out)
    else:
        run(args.weights, args.data, args.calibration_images, args.held_out)


if __name__ == "__main__":
    main()
