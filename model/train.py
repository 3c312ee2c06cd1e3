"""Train CapsNet on MNIST: `python -m model.train --data ../shared/data/mnist`.

Each epoch writes `<out>/last.pt` (model, optimiser, scheduler, history) and, when test accuracy
improves, `<out>/best.pt`; `--resume` continues from a checkpoint, or from exported ONNX weights
with a fresh optimiser (so a new session can keep training what is committed).

An exponential moving average of the weights (Polyak averaging, `--ema-decay`) is kept beside the
trained weights and evaluated each epoch too: late in training Adam's steps make the test accuracy
wander by a few hundredths from epoch to epoch, and the average sits in the middle of that wander.
A checkpoint's `best_weights` says which of the two ("model" or "ema") scored its `best_acc`;
export and evaluation read that one (`checkpoint_weights`).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from model import MNIST_DIR
from model.capsnet import CapsNet, CapsNetConfig, total_loss
from model.cli import log_to_console
from model.data import load_tensors, random_shift
from model.machine import device_name

log = logging.getLogger("capsnet.train")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--data", default=MNIST_DIR, help="directory holding MNIST's four IDX files")
    p.add_argument("--out", default="checkpoints", help="where checkpoints and history go")
    p.add_argument("--epochs", type=int, default=30, help="train until this many epochs in total")
    p.add_argument("--batch-size", type=int, default=128, help="digits a step")
    p.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate at epoch 0")
    p.add_argument("--lr-decay", type=float, default=0.9, help="exponential decay of the learning rate per epoch")
    p.add_argument("--shift", type=int, default=2, help="random shift in px (the paper's augmentation)")
    p.add_argument("--seed", type=int, default=0, help="of the initial weights, the shuffling and the shifts")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="CPU threads for torch")
    p.add_argument(
        "--device",
        default="cuda" if torch.cuda.is_available() else "cpu",
        help="where the model trains: cuda when this torch sees a GPU, else cpu (batches are shifted on the CPU, "
        "from the same seeded generator, then moved, so a seed gives the same batches on either)",
    )
    p.add_argument("--resume", default=None, help="a .pt checkpoint, or weights/capsnet.onnx (fresh optimiser)")
    p.add_argument(
        "--ema-decay",
        type=float,
        default=0.999,
        help="decay per step of the weight average evaluated beside the weights (0: none); 0.999 averages ~1000 steps, about 2 epochs",
    )
    p.add_argument("--limit", type=int, default=0, help="use only this many training images (0: all); for smoke runs")
    return p.parse_args(argv)


@torch.no_grad()
def evaluate_model(model: CapsNet, images: torch.Tensor, labels: torch.Tensor, batch_size: int = 500) -> tuple[float, np.ndarray]:
    """Accuracy and predictions of `model` on a whole split (eval mode, no augmentation)."""
    model.eval()
    device = next(model.parameters()).device
    preds = []
    for i in range(0, len(images), batch_size):
        preds.append(model(images[i : i + batch_size].to(device))["lengths"].argmax(-1).cpu())
    pred = torch.cat(preds)
    return float((pred == labels).float().mean()), pred.numpy()


def checkpoint_weights(ckpt: dict) -> dict:
    """The state dict a checkpoint's `best_acc` was measured on: the weights or their average."""
    return ckpt[ckpt.get("best_weights", "model")]


class WeightAverage:
    """An exponential moving average of a model's parameters, kept in a second model for evaluation."""

    def __init__(self, model: CapsNet, decay: float) -> None:
        self.decay = decay
        self.model = CapsNet(model.cfg).to(next(model.parameters()).device)  # beside the weights it averages
        self.model.load_state_dict(model.state_dict())
        self.model.requires_grad_(False)
        self._src = list(model.parameters())
        self._dst = list(self.model.parameters())

    @torch.no_grad()
    def update(self) -> None:
        torch._foreach_lerp_(self._dst, self._src, 1.0 - self.decay)


def train(args: argparse.Namespace) -> dict:
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    xtr, ytr, xte, yte = load_tensors(args.data, args.limit)

    device = torch.device(args.device)
    model = CapsNet(CapsNetConfig()).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=args.lr_decay)
    state = {"epoch": 0, "history": [], "best_acc": 0.0, "train_seconds": 0.0}
    if args.resume:
        state = resume(args.resume, model, opt, sched, state)
    ema = WeightAverage(model, args.ema_decay) if args.ema_decay > 0 else None
    if ema is not None and state.get("ema") is not None:
        ema.model.load_state_dict(state["ema"])
    state.pop("ema", None)
    gen = torch.Generator().manual_seed(args.seed + state["epoch"])

    for epoch in range(state["epoch"], args.epochs):
        model.train()
        t0 = time.time()
        perm = torch.randperm(len(xtr), generator=gen)
        totals = np.zeros(3)
        steps = 0
        bar = tqdm(range(0, len(xtr), args.batch_size), desc=f"epoch {epoch + 1}/{args.epochs}", unit="step")
        for i in bar:
            idx = perm[i : i + args.batch_size]
            x = random_shift(xtr[idx], args.shift, gen).to(device)
            y = ytr[idx].to(device)
            outs = model(x, y)
            loss, m, r = total_loss(outs, x, y, model.cfg)
            optimise(loss, opt, ema)
            totals += (loss.item(), m.item(), r.item())
            steps += 1
            bar.set_postfix(loss=f"{totals[0] / steps:.4f}")
        sched.step()
        train_s = time.time() - t0
        acc, _ = evaluate_model(model, xte, yte)
        ema_acc = evaluate_model(ema.model, xte, yte)[0] if ema is not None else None
        state["train_seconds"] += train_s
        state["epoch"] = epoch + 1
        rec = {
            "epoch": epoch + 1,
            **epoch_record(totals, steps, train_s, opt, device),
            "test_accuracy": acc,
            **({"ema_test_accuracy": ema_acc} if ema_acc is not None else {}),
        }
        state["history"].append(rec)
        log.info(
            "epoch %d: loss %.4f test accuracy %.4f, averaged weights %s (%.1f s, %.3f s/step)",
            epoch + 1,
            rec["loss"],
            acc,
            f"{ema_acc:.4f}" if ema_acc is not None else "-",
            train_s,
            train_s / steps,
        )
        save_epoch(out, model, ema, opt, sched, args, state, acc, ema_acc)
    return state


def epoch_record(totals: np.ndarray, steps: int, train_s: float, opt: torch.optim.Optimizer, device: torch.device) -> dict:
    """What every epoch's history entry holds, MNIST's and MultiMNIST's: mean losses (total, margin, reconstruction),
    the learning rate it ended at, and its time and what it ran on (a run may go on elsewhere: each epoch says)."""
    return {
        "device": device_name(device),
        "loss": totals[0] / steps,
        "margin_loss": totals[1] / steps,
        "reconstruction_loss": totals[2] / steps,
        "lr": opt.param_groups[0]["lr"],
        "seconds": round(train_s, 1),
        "seconds_per_step": round(train_s / steps, 3),
    }


def optimise(loss: torch.Tensor, opt: torch.optim.Optimizer, ema: WeightAverage | None) -> None:
    """One step of the optimiser on `loss`, and the weight average after it."""
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    if ema is not None:
        ema.update()


def save_epoch(out: Path, model: CapsNet, ema: WeightAverage | None, opt, sched, args: argparse.Namespace, state: dict,
               score: float, ema_score: float | None) -> None:  # fmt: skip
    """`last.pt` every epoch; `best.pt` when the better of the weights and their average (`best_weights` says which)
    beats the best score so far, or there is none yet; `history.json`. MNIST and MultiMNIST training both end an epoch so."""
    ckpt = {
        "model": model.state_dict(),
        "ema": ema.model.state_dict() if ema is not None else None,
        "optimizer": opt.state_dict(),
        "scheduler": sched.state_dict(),
        "config": model.cfg.as_dict(),
        "args": vars(args),
        **state,
    }
    which, best = ("ema", ema_score) if ema_score is not None and ema_score > score else ("model", score)
    if best > state["best_acc"] or not (out / "best.pt").exists():
        state["best_acc"] = best
        ckpt.update(best_acc=best, best_weights=which)
        torch.save(ckpt, out / "best.pt")
    torch.save(ckpt, out / "last.pt")
    (out / "history.json").write_text(json.dumps(state["history"], indent=1))


def resume(path: str, model: CapsNet, opt, sched, state: dict) -> dict:
    """From a .pt checkpoint: everything continues. From ONNX: weights and epoch count, fresh optimiser."""
    p = Path(path)
    if p.suffix == ".onnx":
        from model.onnx_weights import load_onnx_into

        card = load_onnx_into(model, p)
        history = card.get("training", {}).get("history", [])
        epoch = len(history)
        for g in opt.param_groups:
            g["lr"] = g["initial_lr"] * sched.gamma**epoch
        sched.last_epoch = epoch
        log.info("resumed weights from %s after %d epochs (fresh optimiser, lr %.2e)", p, epoch, opt.param_groups[0]["lr"])
        best = max((h["test_accuracy"] for h in history), default=0.0)
        return {"epoch": epoch, "history": history, "best_acc": best, "train_seconds": card.get("training", {}).get("train_seconds", 0.0)}
    ckpt = torch.load(p, map_location="cpu", weights_only=False)
    model.load_state_dict(ckpt["model"])
    opt.load_state_dict(ckpt["optimizer"])
    sched.load_state_dict(ckpt["scheduler"])
    log.info("resumed %s at epoch %d", p, ckpt["epoch"])
    return {k: ckpt.get(k) for k in ("epoch", "history", "best_acc", "train_seconds", "ema")}


def main(argv: list[str] | None = None) -> None:
    log_to_console()
    state = train(parse_args(argv))
    log.info("done: %d epochs, best test accuracy %.4f", state["epoch"], state["best_acc"])


if __name__ == "__main__":
    main()
