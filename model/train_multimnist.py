"""Train the MultiMNIST CapsNet: `python -m model.train_multimnist` (`make train-multimnist`).

The network is the MNIST one on 36x36 input (model.multimnist.CONFIG: 3200 primary capsules on a 10x10 grid).
The margin loss has T_k = 1 for both digits; the decoder redraws each digit from its own capsule (masked to
that class) and the two reconstruction losses are added, as in the paper's section 6.

By default the weights start from the committed MNIST network (`--init weights/capsnet.onnx`): the two
convolutions are the same filters whatever the canvas, each of the 10x10 primary positions takes the W_ij of the
6x6 position that sees the same part of a centred digit (scaled
for the larger sum), and the decoder's last layer draws the MNIST
reconstruction in the middle of the canvas. The paper trains from scratch; on this project's 2-core machines
that is days, and the warm start is stated in the model card (`--init none` trains from scratch).

An "epoch" here is `--pairs-per-epoch` fresh pairs (60,000 by default: each training digit once as the first
digit), after which the 10,000 fixed test pairs are scored and `<out>/last.pt` (and `best.pt` when it improves)
written; `--resume` continues from a checkpoint.
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from pathlib import Path

import numpy as np
import torch
from torch import Tensor
from tqdm import tqdm

from model import FP32_FILE, MNIST_DIR
from model.capsnet import CapsNet, CapsNetConfig, margin_loss
from model.cli import log_to_console
from model.data import load_tensors
from model.multimnist import CONFIG, Pairs, both_right, fixed_test_pairs, make_pairs, two_hot
from model.train import WeightAverage, epoch_record, optimise, save_epoch

log = logging.getLogger("capsnet.train_multimnist")


LR = 1e-3  # Adam's rate at epoch 0, as model/train.py's for MNIST


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--data", default=MNIST_DIR, help="directory holding MNIST's four IDX files")
    p.add_argument("--out", default="checkpoints/multimnist", help="where checkpoints and history go")
    p.add_argument("--epochs", type=int, default=20, help="train until this many epochs in total")
    p.add_argument("--pairs-per-epoch", type=int, default=60_000, help="fresh training pairs between evaluations")
    p.add_argument("--eval-pairs", type=int, default=10_000, help="fixed test pairs scored after each epoch")
    p.add_argument(
        "--single-share",
        type=float,
        default=0.15,
        help="share of training examples that hold one digit only (not in the paper: so that a lone digit is answered as one)",
    )
    p.add_argument(
        "--bf16",
        action="store_true",
        help="forward pass under bfloat16 autocast (twice the steps a second with AMX or AVX-512 BF16, measured; scored in float32)",
    )
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument(
        "--lr",
        type=float,
        default=None,
        help=f"Adam learning rate at epoch 0 (default {LR}); with --resume, the rate from there on (default: the checkpoint's)",
    )
    p.add_argument("--lr-decay", type=float, default=0.9, help="exponential decay of the learning rate per epoch")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="CPU threads for torch")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", help="cuda when torch sees a GPU, else cpu")
    p.add_argument("--init", default=f"weights/{FP32_FILE}", help="MNIST capsnet.onnx to start from, or 'none' for random weights")
    p.add_argument(
        "--freeze",
        nargs="*",
        default=[],
        choices=["conv1"],
        help="layers kept as --init gave them: conv1's stroke filters, whose input gradient through the primary convolution "
        "then goes uncomputed (a step 18%% shorter, measured; not in the paper)",
    )
    p.add_argument("--resume", default=None, help="a checkpoint of this command (last.pt) to continue")
    p.add_argument("--ema-decay", type=float, default=0.999, help="decay per step of the weight average scored beside the weights")
    p.add_argument("--limit", type=int, default=0, help="use only this many training digits (0: all); for smoke runs")
    return p.parse_args(argv)


def init_from_mnist(model: CapsNet, onnx_path: str | Path) -> None:
    """Copy the MNIST network's weights into the 36x36 one (see the module docstring for the mapping)."""
    import onnx
    from onnx import numpy_helper

    src = {i.name: torch.from_numpy(numpy_helper.to_array(i).copy()) for i in onnx.load(str(onnx_path)).graph.initializer}
    mnist = CapsNetConfig()
    cfg = model.cfg
    state = model.state_dict()
    for k in ("conv1.weight", "conv1.bias", "primary.conv.weight", "primary.conv.bias", "decoder.net.0.weight", "decoder.net.0.bias"):
        state[k] = src[k]
    state["decoder.net.2.weight"], state["decoder.net.2.bias"] = src["decoder.net.2.weight"], src["decoder.net.2.bias"]
    # W: [1152,8,160] = [32 types x 6 x 6] -> [32 x 10 x 10]; a digit centred on the canvas sits (36-28)/2 = 4 px in,
    # two primary strides, so position g on the 10x10 grid sees what position g-2 saw on the 6x6 one
    g6, g10 = mnist.primary_grid, cfg.primary_grid
    off = (cfg.image_size - mnist.image_size) // (2 * cfg.primary_stride)
    w = src["digit.W"].view(cfg.primary_channels, g6, g6, cfg.primary_dim, -1)
    near = (torch.arange(g10) - off).clamp(0, g6 - 1)
    # scaled by 1152/3200: s_j is a sum over the children, so it starts at the size the MNIST network was trained for
    # (unscaled, every capsule starts near length 1 and 16% of the first test pairs are read right; scaled, 23%)
    scale = mnist.num_primary / cfg.num_primary
    state["digit.W"] = scale * w[:, near][:, :, near].reshape(cfg.num_primary, cfg.primary_dim, -1).contiguous()
    # decoder output: the 28x28 drawing in the middle of the canvas, the border off (sigmoid(-8) = 3e-4)
    pad = (cfg.image_size - mnist.image_size) // 2
    wd = torch.zeros(cfg.image_size, cfg.image_size, src["decoder.net.4.weight"].shape[1])
    bd = torch.full((cfg.image_size, cfg.image_size), -8.0)
    wd[pad : pad + 28, pad : pad + 28] = src["decoder.net.4.weight"].view(28, 28, -1)
    bd[pad : pad + 28, pad : pad + 28] = src["decoder.net.4.bias"].view(28, 28)
    state["decoder.net.4.weight"], state["decoder.net.4.bias"] = wd.view(cfg.image_size**2, -1), bd.view(-1)
    model.load_state_dict(state)


def forward_pairs(model: CapsNet, image: Tensor, labels: Tensor | None = None) -> dict[str, Tensor]:
    """The network on composites: lengths, poses, and two reconstructions [B,2,1,36,36], each from its own capsule
    (the true digits' in training, the two longest otherwise, longest first)."""
    out = model(image, labels[:, 0] if labels is not None else None)
    # a lone digit (label -1) has its own drawn again as the second reconstruction, and pair_loss leaves that out
    pick = out["lengths"].topk(2, dim=-1).indices[:, 1] if labels is None else torch.where(labels[:, 1] >= 0, labels[:, 1], labels[:, 0])
    second = model.decoder(out["poses"], pick)
    return {"lengths": out["lengths"], "poses": out["poses"], "reconstructions": torch.stack([out["reconstruction"], second], 1)}


def pair_loss(out: dict[str, Tensor], batch: Pairs, cfg: CapsNetConfig) -> tuple[Tensor, Tensor, Tensor]:
    m = margin_loss(out["lengths"], two_hot(batch.labels, cfg.num_classes), cfg)
    present = (batch.labels >= 0).to(out["reconstructions"].dtype)  # [B,2]: no second reconstruction to learn for a lone digit
    errors = ((out["reconstructions"] - batch.digits) ** 2).flatten(2).sum(-1)  # [B,2]
    r = cfg.reconstruction_weight * (errors * present).sum(-1).mean()
    return m + r, m, r


@torch.no_grad()
def evaluate_pairs(model: CapsNet, pairs: Pairs, batch_size: int = 250) -> dict[str, float]:
    """Both digits right (the paper's measure) and at least one right, on fixed pairs."""
    model.eval()
    device = next(model.parameters()).device
    both, one = [], []
    for i in range(0, len(pairs.image), batch_size):
        lengths = model(pairs.image[i : i + batch_size].to(device))["lengths"].cpu()
        b, o = both_right(lengths, pairs.labels[i : i + batch_size])
        both.append(b)
        one.append(o)
    return {"both_right": float(torch.cat(both).float().mean()), "at_least_one_right": float(torch.cat(one).float().mean())}


def train(args: argparse.Namespace) -> dict:
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    xtr, ytr, xte, yte = load_tensors(args.data, args.limit)
    evaluation = fixed_test_pairs(xte, yte, args.eval_pairs)

    device = torch.device(args.device)
    model = CapsNet(CONFIG)
    if args.init != "none" and not args.resume:
        init_from_mnist(model, args.init)
        log.info("started from %s", args.init)
    for name in args.freeze:
        getattr(model, name).requires_grad_(False)  # Adam passes over parameters without a gradient
    # NHWC: oneDNN's convolutions, their backward above all, run faster on it (the steps a second are in the history)
    model.to(device, memory_format=torch.channels_last)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr or LR)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=args.lr_decay)
    state: dict = {"epoch": 0, "history": [], "best_acc": 0.0, "train_seconds": 0.0, "pairs_seen": 0}
    ema = WeightAverage(model, args.ema_decay) if args.ema_decay > 0 else None
    if args.resume:
        ckpt = torch.load(args.resume, map_location="cpu", weights_only=False)
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        sched.load_state_dict(ckpt["scheduler"])
        # A resumed run may decay more slowly than it began: --lr-decay applies from here on.
        sched.gamma = args.lr_decay
        if args.lr is not None:  # ... and may start again from another rate (ExponentialLR scales the group's rate each epoch)
            for group in opt.param_groups:
                group["lr"] = args.lr
        if ema is not None:
            ema.model.load_state_dict(ckpt["ema"] or ckpt["model"])
        state = {k: ckpt[k] for k in state}
        log.info("resumed %s at epoch %d (%d pairs seen)", args.resume, state["epoch"], state["pairs_seen"])
    gen = torch.Generator().manual_seed(args.seed + state["epoch"])

    for epoch in range(state["epoch"], args.epochs):
        model.train()
        t0 = time.time()
        base = torch.randint(0, len(xtr), (args.pairs_per_epoch,), generator=gen)
        totals, steps = np.zeros(3), 0
        bar = tqdm(range(0, len(base), args.batch_size), desc=f"epoch {epoch + 1}/{args.epochs}", unit="step")
        for i in bar:
            batch = make_pairs(xtr, ytr, base[i : i + args.batch_size], gen, args.single_share)
            image = batch.image.to(device, memory_format=torch.channels_last)
            batch = Pairs(image, batch.digits.to(device), batch.labels.to(device))
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.bf16):
                outs = forward_pairs(model, batch.image, batch.labels)
            loss, m, r = pair_loss({k: v.float() for k, v in outs.items()}, batch, model.cfg)
            optimise(loss, opt, ema)
            totals += (loss.item(), m.item(), r.item())
            steps += 1
            bar.set_postfix(loss=f"{totals[0] / steps:.4f}")
        sched.step()
        train_s = time.time() - t0
        score = evaluate_pairs(model, evaluation)
        ema_score = evaluate_pairs(ema.model, evaluation) if ema is not None else None
        state["train_seconds"] += train_s
        state["pairs_seen"] += len(base)
        state["epoch"] = epoch + 1
        rec = {
            "epoch": epoch + 1,
            "pairs_seen": state["pairs_seen"],
            "single_share": args.single_share,
            "bf16": args.bf16,
            "frozen": args.freeze,
            **epoch_record(totals, steps, train_s, opt),
            "test": score,
            **({"ema_test": ema_score} if ema_score is not None else {}),
        }
        state["history"].append(rec)
        log.info("epoch %d: loss %.4f, both right %.4f (averaged weights %s), %.1f s", epoch + 1, rec["loss"], score["both_right"],
                 f"{ema_score['both_right']:.4f}" if ema_score else "-", train_s)  # fmt: skip
        save_epoch(out, model, ema, opt, sched, args, state, score["both_right"], ema_score["both_right"] if ema_score else None)
    return state


def main(argv: list[str] | None = None) -> None:
    log_to_console()
    state = train(parse_args(argv))
    log.info("done: %d epochs, %d pairs, best both-right %.4f", state["epoch"], state["pairs_seen"], state["best_acc"])


if __name__ == "__main__":
    main()
