"""A baseline CNN for the robustness comparison: `python -m model.baseline --data ../shared/data/mnist`.

The paper's baseline (three conv layers of 256, 256 and 128 5x5 channels, then 328 and 192 units, 35.4M
parameters) costs about 60x CapsNet's conv work per image on these 2-core CPU machines, so it is not affordable
here. This is the standard MNIST CNN of pytorch/examples (two 3x3 conv layers of 32 and 64 channels, a 2x2 max
pool, 128 units, dropout; 1.2M parameters), trained like CapsNet was: the same 60k images, the paper's 2-px
random shifts, Adam at 1e-3 decayed by 0.9 per epoch, batch 128, and the same number of epochs as the served
CapsNet (read from the model card). It is exported to weights/baseline-cnn.onnx (image -> logits) so that
model/robustness.py runs both networks through onnxruntime.

    image [B,1,28,28]
      -> Conv 32@3x3 ReLU -> Conv 64@3x3 ReLU     [B,64,24,24]
      -> MaxPool 2x2, Dropout 0.25                [B,64,12,12]
      -> Linear 9216-128 ReLU, Dropout 0.5        [B,128]
      -> Linear 128-10                            [B,10] logits
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from tqdm import tqdm

from model import MNIST_DIR
from model.cli import log_to_console
from model.data import load_tensors, random_shift

log = logging.getLogger("capsnet.baseline")

ONNX_NAME = "baseline-cnn.onnx"


class BaselineCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3)
        self.conv2 = nn.Conv2d(32, 64, 3)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x: Tensor) -> Tensor:
        x = F.relu(self.conv2(F.relu(self.conv1(x))))  # [B,64,24,24]
        x = F.dropout(F.max_pool2d(x, 2), 0.25, self.training).flatten(1)  # [B,9216]
        x = F.dropout(F.relu(self.fc1(x)), 0.5, self.training)  # [B,128]
        return self.fc2(x)  # [B,10]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=MNIST_DIR, help="directory holding MNIST's four IDX files (default: %(default)s)")
    p.add_argument("--out", default="checkpoints/baseline", help="checkpoint directory (default: %(default)s)")
    p.add_argument("--weights", default="weights", help="where baseline-cnn.onnx and the card go (default: %(default)s)")
    p.add_argument("--epochs", type=int, default=0, help="epochs; 0 takes the served CapsNet's from the model card (default: %(default)s)")
    p.add_argument("--batch-size", type=int, default=128, help="(default: %(default)s)")
    p.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate at epoch 0 (default: %(default)s)")
    p.add_argument("--lr-decay", type=float, default=0.9, help="per-epoch decay, as CapsNet's (default: %(default)s)")
    p.add_argument("--shift", type=int, default=2, help="random shift in px, the paper's augmentation (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="(default: %(default)s)")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="CPU threads for torch (default: all)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", help="cuda when this torch sees a GPU, else cpu")
    p.add_argument("--limit", type=int, default=0, help="only this many training images (0: all); for smoke runs")
    return p.parse_args(argv)


@torch.no_grad()
def accuracy(model: nn.Module, x: Tensor, y: Tensor, device: torch.device) -> float:
    model.eval()
    pred = torch.cat([model(x[i : i + 1000].to(device)).argmax(-1).cpu() for i in range(0, len(x), 1000)])
    return float((pred == y).float().mean())


def train(args: argparse.Namespace) -> dict:
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    weights = Path(args.weights)
    card_path = weights / "model-card.json"
    card = json.loads(card_path.read_text())
    epochs = args.epochs or int(card["training"]["epochs"])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    xtr, ytr, xte, yte = load_tensors(args.data, args.limit)
    device = torch.device(args.device)
    model = BaselineCNN().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=args.lr_decay)
    gen = torch.Generator().manual_seed(args.seed)
    history, seconds, best = [], 0.0, (0.0, None)
    for epoch in range(epochs):
        model.train()
        t0 = time.time()
        perm = torch.randperm(len(xtr), generator=gen)
        for i in tqdm(range(0, len(xtr), args.batch_size), desc=f"epoch {epoch + 1}/{epochs}", unit="step"):
            idx = perm[i : i + args.batch_size]
            x = random_shift(xtr[idx], args.shift, gen).to(device)
            loss = F.cross_entropy(model(x), ytr[idx].to(device))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        sched.step()
        seconds += time.time() - t0
        acc = accuracy(model, xte, yte, device)
        history.append({"epoch": epoch + 1, "test_accuracy": acc, "seconds": round(time.time() - t0, 1)})
        log.info("epoch %d: test accuracy %.4f", epoch + 1, acc)
        if acc > best[0]:
            best = (acc, {k: v.detach().cpu().clone() for k, v in model.state_dict().items()})
        torch.save({"model": model.state_dict(), "history": history}, out / "last.pt")
    # the same selection rule as CapsNet's export: the epoch with the best 10k test accuracy
    model = BaselineCNN()
    model.load_state_dict(best[1])
    model.eval()
    path = weights / ONNX_NAME
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            (torch.zeros(1, 1, 28, 28),),
            str(path),
            dynamo=True,
            external_data=False,
            input_names=["image"],
            output_names=["logits"],
            dynamic_shapes={"x": {0: torch.export.Dim("batch", min=1, max=4096)}},
        )
    summary = {
        "architecture": "pytorch/examples MNIST CNN: conv 32@3x3, conv 64@3x3, maxpool 2, dropout 0.25, fc 128, dropout 0.5, fc 10",
        "why_not_the_papers": "the paper's 35.4M-parameter baseline is not affordable on the 2-core CPU machines this was trained on",
        "parameters": sum(p.numel() for p in model.parameters()),
        "file": ONNX_NAME,
        "epochs": epochs,
        "recipe": f"Adam {args.lr} decayed {args.lr_decay}/epoch, batch {args.batch_size}, random shift {args.shift} px, seed {args.seed}",
        "train_seconds": round(seconds, 1),
        "test_accuracy": best[0],
        "history": history,
    }
    (weights / "baseline-cnn.json").write_text(json.dumps(summary, indent=1) + "\n")
    log.info("best test accuracy %.4f -> %s", best[0], path)
    return summary


def main(argv: list[str] | None = None) -> None:
    log_to_console()
    train(parse_args(argv))


if __name__ == "__main__":
    main()
