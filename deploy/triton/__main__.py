"""Write a Triton model repository for the committed ONNX files: `python -m deploy.triton`.

    python -m deploy.triton                          # GPU instances, FP32, model.onnx linked into weights/
    python -m deploy.triton --tensorrt-fp16          # the same, with ONNX Runtime's TensorRT accelerator at FP16
    python -m deploy.triton --kind cpu               # CPU instances: auto precision serves the INT8 file there
    python -m deploy.triton --copy --out /tmp/repo   # real files, to upload for KServe (storageUri)

The committed deploy/triton/model_repository is this command's output with its defaults.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from deploy.triton.config import Serving
from deploy.triton.repository import plan, write_repository
from model.cli import log_to_console
from service.engine.card import load_card
from service.settings import Settings

REPO = Path(__file__).resolve().parents[2]
COMMITTED = REPO / "deploy" / "triton" / "model_repository"  # linked into weights/, committed
DEFAULTS = Settings.model_fields  # the service's own defaults, not whatever CAPSNET_* this shell has set


def decoder_max_batch(card_classes: int, digit_dim: int, capsnet_max_batch: int) -> int:
    """The largest decoder call the front makes: the nine counterfactuals of each image of a full batch (every capsule's
    but the winner's, whose redraw is the network's own), or a /perturb grid (one row per pose dimension, at most
    CAPSNET_MAX_DELTAS tiles each)."""
    return max((card_classes - 1) * capsnet_max_batch, digit_dim * DEFAULTS["max_deltas"].default)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--weights", type=Path, default=REPO / "weights", help="the ONNX files and model-card.json (default: weights/)")
    p.add_argument("--out", type=Path, default=COMMITTED, help="the model repository to write (default: deploy/triton/model_repository)")
    p.add_argument("--kind", choices=["gpu", "cpu"], default="gpu", help="instance_group kind (default: gpu)")
    p.add_argument(
        "--precision",
        choices=["auto", "fp32", "int8"],
        default="auto",
        help="the network's file, chosen as CAPSNET_PRECISION is (default: auto: fp32 on gpu, int8 on cpu if the card allows)",
    )
    p.add_argument(
        "--tensorrt-fp16",
        action="store_true",
        help="ask ONNX Runtime for its TensorRT execution provider at FP16 on GPU instances (default: off, CUDA provider at FP32)",
    )
    p.add_argument(
        "--max-batch",
        type=int,
        default=DEFAULTS["max_batch"].default,
        help="the network's max_batch_size (default: the service's CAPSNET_MAX_BATCH default)",
    )
    p.add_argument(
        "--max-queue-delay-us",
        type=int,
        default=0,
        help="how long the dynamic batcher waits to fill a batch (default: 0, it takes what is queued)",
    )
    p.add_argument("--instances", type=int, default=1, help="model instances per device (default: 1)")
    p.add_argument("--copy", action="store_true", help="copy the ONNX files instead of linking them (default: relative symlinks)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> list[Path]:
    log_to_console()
    args = parse_args(argv)
    if args.copy and args.out.resolve() == COMMITTED.resolve():
        raise SystemExit(f"--copy would put {COMMITTED.relative_to(REPO)} under git as copies of the weights; pass --out elsewhere")
    card = load_card(args.weights)
    serving = Serving(
        max_batch_size=args.max_batch,
        kind=args.kind,
        instances=args.instances,
        max_queue_delay_us=args.max_queue_delay_us,
        tensorrt_fp16=args.tensorrt_fp16,
    )
    models = plan(card, args.precision, serving, decoder_max_batch(card.num_classes, card.digit_dim, args.max_batch))
    return write_repository(args.weights, card, args.out, models, copy=args.copy)


if __name__ == "__main__":
    main()
