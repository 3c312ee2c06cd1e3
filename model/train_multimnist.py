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
written; `--resume` continues from a checkpoint, or from the committed export (weights/multimnist.onnx), which is the
training state that outlives a machine: its card entry holds the epochs, pairs and history to add to.
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from torch import Tensor
from tqdm import tqdm

from model import FP32_FILE, MNIST_DIR
from model.capsnet import CapsNet, CapsNetConfig, margin_loss
from model.cli import log_to_console
from model.data import load_tensors
from model.multimnist import CONFIG, Pairs, both_right, fixed_test_pairs, make_training_pairs, two_hot
from model.pen_strokes import DRAWN_PEN, pen_digits
from model.train import WeightAverage, epoch_record, optimise, save_epoch

log = logging.getLogger("capsnet.train_multimnist")


LR = 1e-3  # Adam's rate at epoch 0, as model/train.py's for MNIST
MNIST_START = f"weights/{FP32_FILE}"  # the MNIST network a first run starts from, and what an older card's run began at


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--data", default=MNIST_DIR, help="directory holding MNIST's four IDX files")
    p.add_argument("--out", default="checkpoints/multimnist", help="where checkpoints and history go")
    p.add_argument("--epochs", type=int, default=None, help="train until this many epochs in total (default: 20 more than it starts from)")
    p.add_argument("--pairs-per-epoch", type=int, default=60_000, help="fresh training pairs between evaluations")
    p.add_argument("--eval-pairs", type=int, default=10_000, help="fixed test pairs scored after each epoch")
    p.add_argument(
        "--single-share",
        type=float,
        default=0.2,
        help="share of training examples that hold one digit only (not in the paper: so that a lone digit is answered as one)",
    )
    p.add_argument(
        "--served-share",
        type=float,
        default=0.15,
        help="share of training composites rescaled as the service hands an upload or a drawing over (ink's longer side to "
        "the served box, centred by mass; not in the paper: so that what people draw and upload is read as test pairs are)",
    )
    p.add_argument(
        "--drawn-share",
        type=float,
        default=0.0,
        help="share of training composites whose two digits are redrawn with the page's pen, from strokes traced from them "
        "(model/pen_strokes.py; not in the paper: so that a pair drawn on the page is read as test pairs are); the redrawn "
        "training digits are kept in --out",
    )
    p.add_argument(
        "--bf16",
        action="store_true",
        help="forward pass under bfloat16 autocast (1.5-1.8x the steps a second with AMX, measured; scored in float32)",
    )
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument(
        "--lr",
        type=float,
        default=None,
        help=f"Adam learning rate at epoch 0 (default {LR}); with --resume, the rate from there on (default: the checkpoint's)",
    )
    p.add_argument("--lr-decay", type=float, default=0.9, help="exponential decay of the learning rate per epoch")
    p.add_argument(
        "--budget-minutes",
        type=float,
        default=0.0,
        help="train for this long (wall clock, from the start) instead of --epochs: after every epoch the count that still "
        "fits is set from the last three, and the rate decays to --lr-final at the last; a step past the budget ends the run "
        "(for a GPU machine had for a fixed time; 0: off)",
    )
    p.add_argument("--lr-final", type=float, default=2e-5, help="with --budget-minutes, the rate of the last epoch")
    p.add_argument(
        "--budget-clock",
        choices=["wall", "cpu"],
        default="wall",
        help="what --budget-minutes counts: wall-clock time, or this process's CPU time over all its threads (so that two "
        "networks compared on a shared machine get the same work from it)",
    )
    p.add_argument(
        "--primary-conv",
        choices=["full", "separable"],
        default="full",
        help="the primary capsules' convolution: the paper's 9x9 over all 256 channels, or a 9x9 filter per channel then a "
        "1x1 mixing (not in the paper; its weights start afresh)",
    )
    p.add_argument(
        "--primary-types",
        type=int,
        default=CONFIG.primary_channels,
        help="primary capsule types (the paper: 32, 3200 capsules on the 36x36 canvas); fewer make routing cheaper, and W_ij "
        "then start afresh",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="CPU threads for torch")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", help="cuda when torch sees a GPU, else cpu")
    p.add_argument("--init", default=MNIST_START, help="MNIST capsnet.onnx to start from, or 'none' for random weights")
    p.add_argument(
        "--freeze",
        nargs="*",
        default=[],
        choices=["conv1", "primary"],
        help="layers kept as --init gave them (not in the paper): conv1's stroke filters, whose input gradient through the "
        "primary convolution then goes uncomputed; with primary too, no convolution has a backward pass at all and only "
        "W_ij and the decoder learn (BENCHMARKS.md's notes compare the pairs an hour and the scores)",
    )
    p.add_argument(
        "--resume",
        default=None,
        help="what to continue: a checkpoint of this command (last.pt), or an export (weights/multimnist.onnx: its weights, and "
        "from its card entry the epochs, pairs and history so far and the rate to go on at, with a fresh optimiser)",
    )
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
    shared = ["conv1.weight", "conv1.bias", "decoder.net.0.weight", "decoder.net.0.bias"]
    if cfg.primary_conv == mnist.primary_conv:  # another primary convolution has no counterpart to copy: it starts afresh
        shared += ["primary.conv.weight", "primary.conv.bias"]
    for k in shared:
        state[k] = src[k]
    state["decoder.net.2.weight"], state["decoder.net.2.bias"] = src["decoder.net.2.weight"], src["decoder.net.2.bias"]
    # W: [1152,8,160] = [32 types x 6 x 6] -> [32 x 10 x 10]; a digit centred on the canvas sits (36-28)/2 = 4 px in,
    # two primary strides, so position g on the 10x10 grid sees what position g-2 saw on the 6x6 one
    g6, g10 = mnist.primary_grid, cfg.primary_grid
    off = (cfg.image_size - mnist.image_size) // (2 * cfg.primary_stride)
    w = src["digit.W"].view(mnist.primary_channels, g6, g6, mnist.primary_dim, -1)
    near = (torch.arange(g10) - off).clamp(0, g6 - 1)
    # scaled by 1152/3200: s_j is a sum over the children, so it starts at the size the MNIST network was trained for
    # (unscaled, every capsule starts near length 1 and 16% of the first test pairs are read right; scaled, 23%)
    scale = mnist.num_primary / cfg.num_primary
    if cfg.primary_conv == mnist.primary_conv and cfg.primary_channels == mnist.primary_channels:  # else W_ij start afresh too
        state["digit.W"] = scale * w[:, near][:, :, near].reshape(cfg.num_primary, cfg.primary_dim, -1).contiguous()
    # decoder output: the 28x28 drawing in the middle of the canvas, the border off (sigmoid(-8) = 3e-4)
    pad = (cfg.image_size - mnist.image_size) // 2
    wd = torch.zeros(cfg.image_size, cfg.image_size, src["decoder.net.4.weight"].shape[1])
    bd = torch.full((cfg.image_size, cfg.image_size), -8.0)
    wd[pad : pad + 28, pad : pad + 28] = src["decoder.net.4.weight"].view(28, 28, -1)
    bd[pad : pad + 28, pad : pad + 28] = src["decoder.net.4.bias"].view(28, 28)
    state["decoder.net.4.weight"], state["decoder.net.4.bias"] = wd.view(cfg.image_size**2, -1), bd.view(-1)
    model.load_state_dict(state)


def resume_from_export(model: CapsNet, onnx_path: str | Path) -> tuple[dict, float]:
    """The committed export is the training state that outlives a machine: its weights go into `model`, and its card entry
    gives the state to add to (epochs, pairs seen, history, train seconds, the score to beat) and the rate the last epoch
    ended at, for a fresh optimiser."""
    from model.onnx_weights import load_onnx_into

    entry = load_onnx_into(model, onnx_path, prefix="model.").get("multimnist") or {}
    record = entry.get("training", {})
    history = record.get("history", [])
    state = {
        "epoch": int(record.get("epochs", len(history))),
        "history": history,
        "best_acc": float(entry.get("test", {}).get("both_right", 0.0)),
        "train_seconds": float(record.get("train_seconds", 0.0)),
        "pairs_seen": int(record.get("pairs_seen", 0)),
        "started_from": record.get("started_from", MNIST_START),  # where the first of its epochs began
    }
    return state, history[-1]["lr"] if history else LR


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
        lengths = model(pairs.image[i : i + batch_size].to(device))["lengths"]
        b, o = both_right(lengths, pairs.labels[i : i + batch_size].to(device))
        both.append(b)
        one.append(o)
    return {"both_right": torch.cat(both).float().mean().item(), "at_least_one_right": torch.cat(one).float().mean().item()}


def fit_schedule(epoch_seconds: float, seconds_left: float, lr_now: float, lr_final: float) -> tuple[int, float]:
    """How many more epochs of `epoch_seconds` fit in `seconds_left`, and the decay per epoch that takes the rate from
    `lr_now` (the next epoch's) to `lr_final` (the last one's): a budgeted run anneals fully whatever speed it meets."""
    more = max(0, int(seconds_left // epoch_seconds))
    gamma = (lr_final / lr_now) ** (1.0 / (more - 1)) if more > 1 else 1.0
    return more, min(gamma, 1.0)  # a run already below lr_final (resumed from an annealed one) holds its rate, never raises it


class Budget:
    """--budget-minutes: a clock from the start of training (the wall's, or the process's CPU time), and the epochs that
    still fit in it."""

    def __init__(self, minutes: float, lr_final: float, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.mark = clock()
        self.deadline = self.mark + 60.0 * minutes
        self.lr_final = lr_final
        self.rounds: list[float] = []  # each epoch's whole round: training, scoring, saving (and start-up, the first)

    def spent(self) -> bool:
        return self.clock() > self.deadline

    def refit(self, lr_now: float) -> tuple[int, float]:
        """After an epoch: how many more fit, on the mean of the last three rounds (the first warms caches and kernels
        up), and the decay that brings `lr_now` to the final rate at the last of them."""
        now = self.clock()
        self.rounds.append(now - self.mark)
        self.mark, recent = now, self.rounds[-3:]
        return fit_schedule(sum(recent) / len(recent), self.deadline - now, lr_now, self.lr_final)


def train(args: argparse.Namespace) -> dict:
    clock = time.process_time if args.budget_clock == "cpu" else time.time
    budget = Budget(args.budget_minutes, args.lr_final, clock) if args.budget_minutes > 0 else None
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    device = torch.device(args.device)
    torch.backends.cudnn.benchmark = True  # one input size throughout: let cuDNN pick its fastest convolutions once
    # the digits and the fixed test pairs live where the network does, so that pairs are made there batch by batch
    xtr, ytr, xte, yte = load_tensors(args.data, args.limit)
    drawn = None
    if args.drawn_share > 0:
        pen = pen_digits((xtr[:, 0].numpy() * 255.0).round().astype(np.uint8), DRAWN_PEN, out / f"pen-digits-{len(xtr)}.npz")
        drawn = torch.from_numpy(pen).unsqueeze(1).to(device)
    xtr, ytr = xtr.to(device), ytr.to(device)
    evaluation = fixed_test_pairs(xte, yte, args.eval_pairs)
    evaluation = Pairs(evaluation.image.to(device), evaluation.digits.to(device), evaluation.labels.to(device))

    model = CapsNet(replace(CONFIG, primary_conv=args.primary_conv, primary_channels=args.primary_types))
    if args.init != "none" and not args.resume:
        init_from_mnist(model, args.init)
        log.info("started from %s", args.init)
    elif not args.resume:
        log.info("started from random weights, as the paper trains")
    for name in args.freeze:
        getattr(model, name).requires_grad_(False)  # Adam passes over parameters without a gradient
    # NHWC: oneDNN's convolutions, their backward above all, run faster on it (the steps a second are in the history)
    model.to(device, memory_format=torch.channels_last)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr or LR, fused=device.type == "cuda")
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=args.lr_decay)
    started = args.init if args.init != "none" else "random weights"
    state: dict = {"epoch": 0, "history": [], "best_acc": 0.0, "train_seconds": 0.0, "pairs_seen": 0, "started_from": started}
    ema = WeightAverage(model, args.ema_decay) if args.ema_decay > 0 else None
    if args.resume and Path(args.resume).suffix == ".onnx":
        state, lr = resume_from_export(model, args.resume)
        for group in opt.param_groups:
            group["lr"] = args.lr if args.lr is not None else lr
        sched.gamma = args.lr_decay
        if ema is not None:
            ema.model.load_state_dict(model.state_dict())
        # the card's figure is onnxruntime's on all 10,000 test pairs; what this run's epochs are compared with is the same
        # weights scored on this run's own evaluation pairs
        state["best_acc"] = evaluate_pairs(model, evaluation)["both_right"]
        log.info("resumed the export %s at epoch %d (%d pairs seen, both right %.4f on %d pairs), Adam afresh at %.2e",
                 args.resume, state["epoch"], state["pairs_seen"], state["best_acc"], len(evaluation.labels),
                 opt.param_groups[0]["lr"])  # fmt: skip
    elif args.resume:
        ckpt = torch.load(args.resume, map_location="cpu", weights_only=False)
        model.load_state_dict(ckpt["model"])
        if "optimizer" in ckpt:
            opt.load_state_dict(ckpt["optimizer"])
            sched.load_state_dict(ckpt["scheduler"])
        else:  # a packed checkpoint (model/checkpoint_parts.py) carries no optimiser: Adam starts afresh at the last rate
            log.info("%s holds no optimiser state: Adam starts afresh", args.resume)
            for group in opt.param_groups:
                group["lr"] = ckpt["history"][-1]["lr"] if ckpt.get("history") else LR
        # A resumed run may decay more slowly than it began: --lr-decay applies from here on.
        sched.gamma = args.lr_decay
        if args.lr is not None:  # ... and may start again from another rate (ExponentialLR scales the group's rate each epoch)
            for group in opt.param_groups:
                group["lr"] = args.lr
        if ema is not None:
            ema.model.load_state_dict(ckpt["ema"] or ckpt["model"])
        state = {k: ckpt.get(k, state[k]) for k in state}  # a checkpoint from before started_from was kept has none
        log.info("resumed %s at epoch %d (%d pairs seen)", args.resume, state["epoch"], state["pairs_seen"])
    gen = torch.Generator(device=device).manual_seed(args.seed + state["epoch"])

    epochs = args.epochs if args.epochs is not None else state["epoch"] + 20
    last_epoch = epochs if budget is None else state["epoch"] + 1  # a budget sets the count after each epoch
    while state["epoch"] < last_epoch:
        model.train()
        t0, cpu0 = time.time(), time.process_time()
        base = torch.randint(0, len(xtr), (args.pairs_per_epoch,), generator=gen, device=device)
        totals, steps, seen = torch.zeros(3, device=device), 0, 0
        bar = tqdm(range(0, len(base), args.batch_size), desc=f"epoch {state['epoch'] + 1}/{last_epoch}", unit="step")
        for i in bar:
            if budget is not None and budget.spent():
                log.info("the budget of %.1f min is spent: the epoch ends after %d of %d pairs", args.budget_minutes, seen, len(base))
                break
            batch = make_training_pairs(
                xtr, ytr, base[i : i + args.batch_size], gen, args.single_share, args.served_share, drawn, args.drawn_share
            )
            batch = Pairs(batch.image.contiguous(memory_format=torch.channels_last), batch.digits, batch.labels)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.bf16):
                outs = forward_pairs(model, batch.image, batch.labels)
            loss, m, r = pair_loss({k: v.float() for k, v in outs.items()}, batch, model.cfg)
            optimise(loss, opt, ema)
            totals += torch.stack([loss.detach(), m.detach(), r.detach()])  # summed where they are: no wait for the GPU
            steps += 1
            seen += len(batch.labels)
            if steps % 25 == 0:
                bar.set_postfix(loss=f"{totals[0].item() / steps:.4f}")
        if steps == 0:
            break
        sched.step()
        train_s = time.time() - t0
        score = evaluate_pairs(model, evaluation)
        ema_score = evaluate_pairs(ema.model, evaluation) if ema is not None else None
        state["train_seconds"] += train_s
        state["pairs_seen"] += seen
        state["epoch"] += 1
        rec = {
            "epoch": state["epoch"],
            "pairs_seen": state["pairs_seen"],
            "single_share": args.single_share,
            "served_share": args.served_share,
            "drawn_share": args.drawn_share,
            "bf16": args.bf16,
            "frozen": args.freeze,
            "batch_size": args.batch_size,
            "primary_conv": args.primary_conv,
            "primary_types": args.primary_types,
            "cpu_seconds": round(time.process_time() - cpu0, 1),  # the process's, all threads: training and this epoch's scoring
            **epoch_record(totals.double().cpu().numpy(), steps, train_s, opt, device),
            "test": score,
            **({"ema_test": ema_score} if ema_score is not None else {}),
        }
        state["history"].append(rec)
        log.info("epoch %d: loss %.4f, both right %.4f (averaged weights %s), %.1f s", state["epoch"], rec["loss"], score["both_right"],
                 f"{ema_score['both_right']:.4f}" if ema_score else "-", train_s)  # fmt: skip
        save_epoch(out, model, ema, opt, sched, args, state, score["both_right"], ema_score["both_right"] if ema_score else None)
        if budget is not None:
            more, gamma = budget.refit(opt.param_groups[0]["lr"])
            last_epoch, sched.gamma = state["epoch"] + more, gamma
            if more > 1:
                args.lr_decay = gamma  # what the checkpoints and the model card record as the decay
            log.info("budget: %d more epochs fit, the rate decaying %.4f an epoch to %.1e", more, gamma, args.lr_final)
    return state


def main(argv: list[str] | None = None) -> None:
    log_to_console()
    state = train(parse_args(argv))
    log.info("done: %d epochs, %d pairs, best both-right %.4f", state["epoch"], state["pairs_seen"], state["best_acc"])


if __name__ == "__main__":
    main()
