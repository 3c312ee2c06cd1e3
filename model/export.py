"""Export a trained CapsNet to ONNX, check parity with PyTorch, measure it, and write the model card.

`python -m model.export --checkpoint checkpoints/best.pt` writes into `weights/`:
- capsnet.onnx: image [N,1,28,28] float32 (0 background, 1 ink) -> lengths [N,10], poses [N,10,16],
  reconstruction [N,1,28,28] (decoder on the longest capsule), coupling [N,1152,10] (final c_ij,
  primary capsule index = channel*36 + row*6 + col)
  and primary [N,1152,8] (the primary capsules, routing.onnx's input);
- decoder.onnx: digit int64 [N], pose float32 [N,16] -> reconstruction [N,1,28,28];
- routing.onnx: every routing iteration, unrolled past the trained 3 (model/routing.py);
- model-card.json: sizes, recipe, every epoch, onnxruntime test accuracy, sha256 of every file.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import warnings
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from model import DECODER_FILE, FP32_FILE, INT8_FILE, MNIST_DIGIT_BOX, MNIST_DIR
from model.capsnet import CapsNet, CapsNetConfig, count_parameters
from model.cli import log_to_console
from model.decoder_layout import tensors as decoder_tensors
from model.machine import cpu_model
from model.train import checkpoint_weights

log = logging.getLogger("capsnet.export")

OPSET = 18
MODEL_NAME = "capsnet-mnist"
PARITY_ATOL = 1e-4
# capsnet.onnx's outputs, in order; `primary` (the 1152 primary capsules) feeds routing.onnx (model/routing.py)
OUTPUTS = ("lengths", "poses", "reconstruction", "coupling", "primary")
DEVIATIONS = [
    "Routing iterations before the last use a detached u_hat: gradients reach W only through the final iteration (forward pass unchanged).",
    "squash uses sqrt(max(|s|^2, 1e-8)) so that a zero vector gives zero and a finite gradient (a clamp: "
    "torch.onnx's optimiser folds an added 1e-8 away).",
    "Learning rate: Adam 1e-3 with exponential decay per epoch (the paper gives no schedule).",
    "Checkpoint selection: the exported weights are those of the epoch, trained or weight-averaged "
    "(training.exported_weights), with the best 10k test accuracy; there is no separate validation split, "
    "so the stated accuracy includes that choice.",
]


class ExportedCapsNet(CapsNet):
    """The network with a positional, tuple-returning forward, as ONNX wants; parameter names unchanged."""

    def forward(self, image: Tensor) -> tuple[Tensor, ...]:  # type: ignore[override]
        o = super().forward(image)
        return tuple(o[name] for name in OUTPUTS)


class ExportedDecoder(nn.Module):
    """Decoder fed one digit capsule's pose: what the page's sliders redraw through."""

    def __init__(self, model: CapsNet) -> None:
        super().__init__()
        self.cfg = model.cfg
        self.decoder = model.decoder

    def forward(self, digit: Tensor, pose: Tensor) -> Tensor:
        v = pose.unsqueeze(1).expand(-1, self.cfg.num_classes, -1)  # [N,10,16], masked to `digit` inside
        return self.decoder(v, digit)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _export(module: nn.Module, args: tuple, path: Path, inputs: list[str], outputs: list[str]) -> None:
    batch = torch.export.Dim("batch", min=1, max=4096)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module,
            args,
            str(path),
            dynamo=True,
            external_data=False,
            opset_version=OPSET,
            input_names=inputs,
            output_names=outputs,
            dynamic_shapes={name: {0: batch} for name in inputs},
            optimize=True,
            verbose=False,
        )


def export_onnx(model: CapsNet, out_dir: Path) -> tuple[Path, Path]:
    """Write capsnet.onnx and decoder.onnx with a dynamic batch axis."""
    out_dir.mkdir(parents=True, exist_ok=True)
    full = ExportedCapsNet(model.cfg)
    full.load_state_dict(model.state_dict())
    full.eval()
    capsnet_path, decoder_path = out_dir / FP32_FILE, out_dir / DECODER_FILE
    _export(full, (torch.rand(2, 1, 28, 28),), capsnet_path, ["image"], list(OUTPUTS))
    dec = ExportedDecoder(full).eval()
    _export(dec, (torch.tensor([3, 5]), torch.rand(2, model.cfg.digit_dim)), decoder_path, ["digit", "pose"], ["reconstruction"])
    return capsnet_path, decoder_path


def check_parity(model: CapsNet, capsnet_path: Path, decoder_path: Path, batches: tuple[int, ...] = (1, 7)) -> dict[str, float]:
    """Max abs difference of every output between PyTorch and onnxruntime; raises past PARITY_ATOL."""
    import onnxruntime as ort

    model.eval()
    sess = ort.InferenceSession(str(capsnet_path), providers=["CPUExecutionProvider"])
    dsess = ort.InferenceSession(str(decoder_path), providers=["CPUExecutionProvider"])
    gen = torch.Generator().manual_seed(0)
    worst: dict[str, float] = {}
    for n in batches:
        x = torch.rand(n, 1, 28, 28, generator=gen)
        with torch.no_grad():
            ref = model(x)
            digit = torch.randint(0, model.cfg.num_classes, (n,), generator=gen)
            pose = ref["poses"][torch.arange(n), digit]
            dref = model.decoder(ref["poses"], digit)
        got = dict(zip(OUTPUTS, sess.run(list(OUTPUTS), {"image": x.numpy()})))
        got["decoder"] = dsess.run(None, {"digit": digit.numpy(), "pose": pose.numpy()})[0]
        track_worst(worst, got, {k: v.numpy() for k, v in ref.items()} | {"decoder": dref.numpy()})
    return checked_parity(worst)


def track_worst(worst: dict[str, float], got: dict[str, np.ndarray], ref: dict[str, np.ndarray]) -> None:
    """Each output's largest difference between onnxruntime (`got`) and PyTorch (`ref`) so far, in `worst`."""
    for k in got:
        worst[k] = max(worst.get(k, 0.0), float(np.abs(got[k] - ref[k]).max()))


def checked_parity(worst: dict[str, float]) -> dict[str, float]:
    """`worst` when every output is within PARITY_ATOL of PyTorch's; an export that is not is refused."""
    bad = {k: v for k, v in worst.items() if v > PARITY_ATOL}
    if bad:
        raise RuntimeError(f"ONNX parity failed (max abs diff > {PARITY_ATOL}): {bad}")
    return worst


def hardware() -> str:
    return f"{cpu_model()}, {os.cpu_count()} cores, CPU only"


def described(model: CapsNet, files: dict[str, Path], decoder_path: Path, parity: dict) -> dict:
    """What a card entry says the same way of every exported network, MNIST's and MultiMNIST's: its sizes, parameters,
    input, the decoder's signature and where the page reads its layers, the files with their sha256, and the parity with
    PyTorch."""
    cfg = model.cfg
    return {
        "architecture": cfg.as_dict(),
        "parameters": {"total": count_parameters(model), "without_decoder": count_parameters(model, include_decoder=False)},
        "input": {
            "name": "image",
            "dtype": "float32",
            "shape": ["N", 1, cfg.image_size, cfg.image_size],
            "range": [0.0, 1.0],
            "background": 0.0,
            "ink": 1.0,
        },
        "decoder": {
            "inputs": {"digit": ["N"], "pose": ["N", cfg.digit_dim]},
            "outputs": {"reconstruction": ["N", 1, cfg.image_size, cfg.image_size]},
            "tensors": decoder_tensors(decoder_path),  # where the page's decoder reads each layer (model/decoder_layout.py)
        },
        "files": {name: {"sha256": sha256(path), "bytes": path.stat().st_size} for name, path in files.items()},
        "parity_max_abs_diff": {k: float(f"{v:.3g}") for k, v in parity.items()},
    }


def build_card(
    model: CapsNet, ckpt: dict, capsnet_path: Path, decoder_path: Path, parity: dict, accuracy: dict | None, later: list[dict] | None = None
) -> dict:
    """`later`: epochs trained after the exported checkpoint (they did not beat it), kept so every epoch is on record."""
    cfg = model.cfg
    history = ckpt.get("history", [])
    args = ckpt.get("args", {})
    epochs = int(ckpt.get("epoch", len(history)))
    common = described(model, {FP32_FILE: capsnet_path, DECODER_FILE: decoder_path}, decoder_path, parity)
    return {
        "name": MODEL_NAME,
        "version": f"{epochs}ep-{sha256(capsnet_path)[:8]}",
        "paper": "Sabour, Frosst & Hinton, Dynamic Routing Between Capsules, NeurIPS 2017",
        **common,
        "input": {**common["input"], "normalisation": "none (MNIST bytes / 255)", "mnist_digit_box": MNIST_DIGIT_BOX},
        "outputs": {
            "lengths": ["N", cfg.num_classes],
            "poses": ["N", cfg.num_classes, cfg.digit_dim],
            "reconstruction": ["N", 1, cfg.image_size, cfg.image_size],
            "coupling": ["N", cfg.num_primary, cfg.num_classes],
            "primary": ["N", cfg.num_primary, cfg.primary_dim],
        },
        "coupling_index": "primary capsule i = channel * 36 + row * 6 + col (32 channels, 6x6 grid)",
        "digitcaps_weight_layout": "digit.W [1152, 8, 160]: W[i, :, 16*j:16*(j+1)] is the 8x16 W_ij, u_hat_j|i = u_i W_ij",
        "onnx": {"opset": OPSET, "dynamic_axes": {"batch": 0}, "exporter": f"torch.onnx (dynamo) {torch.__version__}"},
        "training": {
            "data": "MNIST 60k train, 10k test",
            "optimizer": "Adam",
            "lr": args.get("lr"),
            "lr_decay_per_epoch": args.get("lr_decay"),
            "batch_size": args.get("batch_size"),
            "augmentation": f"random shift up to {args.get('shift')} px, zero padding",
            "seed": args.get("seed"),
            "resumed_from": args.get("resume"),
            "weight_average_decay": args.get("ema_decay"),
            "exported_weights": (
                "exponential moving average of the weights (Polyak averaging), the better of the two on the test set"
                if ckpt.get("best_weights") == "ema"
                else "the trained weights"
            ),
            "epochs": epochs,
            "train_seconds": round(float(ckpt.get("train_seconds", 0.0)), 1),
            "hardware": hardware(),
            "torch": torch.__version__,
            "history": history,
            "epochs_after_this_checkpoint": later or [],
        },
        "test": accuracy,
        "deviations_from_paper": DEVIATIONS,
    }


def main(argv: list[str] | None = None) -> None:
    log_to_console()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", default="checkpoints/best.pt", help="training checkpoint to export")
    p.add_argument("--out", default="weights", help="directory for the ONNX files and model card")
    p.add_argument("--data", default=MNIST_DIR, help="MNIST directory for the test accuracy")
    p.add_argument("--no-eval", action="store_true", help="skip the test-set accuracy (card says null) and the INT8 model")
    p.add_argument("--no-int8", action="store_true", help="skip the INT8 model (model/quantize.py)")
    p.add_argument("--routing-iterations", type=int, default=6, help="iterations routing.onnx unrolls (model/routing.py)")
    args = p.parse_args(argv)

    ckpt = torch.load(args.checkpoint, map_location="cpu", weights_only=False)
    model = CapsNet(CapsNetConfig())
    model.load_state_dict(checkpoint_weights(ckpt))
    model.eval()
    out = Path(args.out)
    capsnet_path, decoder_path = export_onnx(model, out)
    parity = check_parity(model, capsnet_path, decoder_path)
    log.info("parity with PyTorch, max abs diff: %s", parity)
    accuracy = None
    if not args.no_eval:
        from model.data import load_mnist
        from model.evaluate import predict_onnx, summarize

        images, labels = load_mnist(args.data, "test")
        accuracy = summarize(predict_onnx(capsnet_path, images), labels)
        accuracy["measured_with"] = "onnxruntime CPUExecutionProvider on weights/capsnet.onnx"
        log.info("onnxruntime test accuracy %.4f", accuracy["accuracy"])
    run_history = Path(args.checkpoint).with_name("history.json")
    later = [h for h in json.loads(run_history.read_text()) if h["epoch"] > ckpt.get("epoch", 0)] if run_history.exists() else []
    card = build_card(model, ckpt, capsnet_path, decoder_path, parity, accuracy, later)
    previous = out / "model-card.json"
    if previous.exists() and "multimnist" in (kept := json.loads(previous.read_text())):
        card["multimnist"] = kept["multimnist"]  # the MultiMNIST network's entry (model/export_multimnist.py) is not this export's
    (out / "model-card.json").write_text(json.dumps(card, indent=1) + "\n")
    log.info("wrote %s, %s and the model card", capsnet_path, decoder_path)
    stale = out / INT8_FILE
    if stale.exists():
        stale.unlink()  # quantised from the previous weights
    if not (args.no_eval or args.no_int8):
        from model.quantize import run as quantize

        quantize(out, Path(args.data))
    from model.routing import run as routing

    routing(out, args.routing_iterations)


if __name__ == "__main__":
    main()
