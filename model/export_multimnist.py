"""Export the MultiMNIST CapsNet, check parity, measure it on 10,000 test pairs, and write its model-card entry.

`python -m model.export_multimnist --checkpoint checkpoints/multimnist/best.pt` writes into `weights/`:
- multimnist.onnx: image [N,1,36,36] float32 in [0,1] -> lengths [N,10], poses [N,10,16], reconstructions
  [N,2,1,36,36] (the decoder on the two longest capsules, longest first);
- multimnist-decoder.onnx: digit int64 [N], pose float32 [N,16] -> reconstruction [N,1,36,36];
- the `multimnist` entry of model-card.json (the rest of the card is left as it is): sizes, files, parity, the
  onnxruntime score on the fixed test pairs (both digits right, at least one right, how often each reconstruction is
  nearer its own digit than the other), the rule that tells one digit from two, and the training record.

The committed files are the training state (the next run resumes from them), and each version adds its size to every
clone: new weights replace them only when they read both digits of at least `--min-gain` (half a point) more of the
test pairs than the committed files do on the same pairs; otherwise nothing in `--out` changes.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import tempfile
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from model import MNIST_DIGIT_BOX, MNIST_DIR, MULTIMNIST_DECODER_FILE, MULTIMNIST_FILE
from model.capsnet import CapsNet
from model.cli import log_to_console
from model.data import load_tensors
from model.export import OPSET, ExportedDecoder, _export, checked_parity, described, hardware, sha256, track_worst
from model.multimnist import CONFIG, MAX_SHIFT, TEST_SEED, both_right, fixed_test_pairs, place
from model.onnx_weights import HALF_MIN_ELEMENTS, round_to_half, store_half
from model.train import checkpoint_weights
from model.train_multimnist import forward_pairs

log = logging.getLogger("capsnet.export_multimnist")

NAME = "capsnet-multimnist"
FILE, DECODER = MULTIMNIST_FILE, MULTIMNIST_DECODER_FILE
OUTPUTS = ("lengths", "poses", "reconstructions")
MIN_GAIN = 0.005  # half a point of the test pairs read right: what earns a new version of the files in git


class ExportedMultiMNIST(nn.Module):
    def __init__(self, model: CapsNet) -> None:
        super().__init__()
        self.model = model

    def forward(self, image: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        out = forward_pairs(self.model, image)
        return out["lengths"], out["poses"], out["reconstructions"]


def export(model: CapsNet, out: Path) -> tuple[Path, Path]:
    """The network and its decoder as ONNX files in `out`. The network's file stores its weights at half precision
    (model/onnx_weights.store_half: half the room in git, the same answers), and `model` is left holding them rounded
    so, so that the parity check and every figure are of what the file holds. The decoder's file stays float32: the
    page reads its layers as float32 arrays (static/capsule_decoder.js)."""
    s = model.cfg.image_size
    net, dec = out / FILE, out / DECODER
    round_to_half(model)
    _export(ExportedMultiMNIST(model).eval(), (torch.rand(2, 1, s, s),), net, ["image"], list(OUTPUTS))
    store_half(net)
    _export(
        ExportedDecoder(model).eval(),
        (torch.tensor([3, 5]), torch.rand(2, model.cfg.digit_dim)),
        dec,
        ["digit", "pose"],
        ["reconstruction"],
    )
    return net, dec


def parity(model: CapsNet, net: Path, dec: Path) -> dict[str, float]:
    import onnxruntime as ort

    sess = ort.InferenceSession(str(net), providers=["CPUExecutionProvider"])
    dsess = ort.InferenceSession(str(dec), providers=["CPUExecutionProvider"])
    gen = torch.Generator().manual_seed(0)
    worst: dict[str, float] = {}
    for n in (1, 7):
        x = torch.rand(n, 1, model.cfg.image_size, model.cfg.image_size, generator=gen)
        with torch.no_grad():
            ref = forward_pairs(model, x)
            digit = torch.randint(0, 10, (n,), generator=gen)
            pose = ref["poses"][torch.arange(n), digit]
            ref = {k: v.numpy() for k, v in ref.items()} | {"decoder": model.decoder(ref["poses"], digit).numpy()}
        got = dict(zip(OUTPUTS, sess.run(list(OUTPUTS), {"image": x.numpy()})))
        got["decoder"] = dsess.run(None, {"digit": digit.numpy(), "pose": pose.numpy()})[0]
        track_worst(worst, got, ref)
    return checked_parity(worst)


def run_onnx(net: Path, images: np.ndarray, batch: int = 250) -> dict[str, np.ndarray]:
    import onnxruntime as ort

    sess = ort.InferenceSession(str(net), providers=["CPUExecutionProvider"])
    parts = [sess.run(list(OUTPUTS), {"image": images[i : i + batch]}) for i in range(0, len(images), batch)]
    return {k: np.concatenate([p[j] for p in parts]) for j, k in enumerate(OUTPUTS)}


def score(out: dict[str, np.ndarray], digits: np.ndarray, labels: np.ndarray) -> dict:
    """Both right, at least one right, and for the pairs read right, how often each reconstruction (drawn from the capsule
    of one of the two digits) is nearer that digit alone than the other digit alone (squared error)."""
    both, one = both_right(torch.from_numpy(out["lengths"]), torch.from_numpy(labels))
    top2 = np.argsort(-out["lengths"], axis=-1)[:, :2]
    ok = both.numpy()
    own = (top2[:, :, None] == labels[:, None, :]).argmax(-1)  # [N,2]: which of the two digits each reconstruction is of
    rec = out["reconstructions"][ok]  # [M,2,1,S,S]
    d = digits[ok]
    idx = np.arange(len(rec))
    nearer = []
    for k in range(2):
        mine, theirs = d[idx, own[ok, k]], d[idx, 1 - own[ok, k]]
        nearer.append(((rec[:, k] - mine) ** 2).sum((1, 2, 3)) < ((rec[:, k] - theirs) ** 2).sum((1, 2, 3)))
    return {
        "pairs": int(len(labels)),
        "both_right": round(float(both.float().mean()), 4),
        "at_least_one_right": round(float(one.float().mean()), 4),
        "reconstruction_nearer_own_digit": round(float(np.concatenate(nearer).mean()), 4) if ok.any() else None,
        "pair_seed": TEST_SEED,
    }


def second_digit_rule(pair_lengths: np.ndarray, single_lengths: np.ndarray) -> dict:
    """The second-longest capsule's length above which a second digit is said to be there: the threshold that makes the
    fewest mistakes on the test pairs and as many single test digits on the same canvas, with its figures."""
    p2 = np.sort(pair_lengths, -1)[:, -2]
    s2 = np.sort(single_lengths, -1)[:, -2]
    candidates = np.unique(np.round(np.concatenate([p2, s2]), 3))
    errors = [(p2 < t).mean() + (s2 >= t).mean() for t in candidates]
    t = float(candidates[int(np.argmin(errors))])
    return {
        "second_min_length": t,
        "pairs_called_single": round(float((p2 < t).mean()), 4),
        "singles_called_pairs": round(float((s2 >= t).mean()), 4),
        "measured_on": f"{len(p2)} test pairs and {len(s2)} single test digits shifted up to {MAX_SHIFT} px on the same canvas",
    }


def pair_box(images: np.ndarray) -> int:
    """The median longer side of the two digits' ink together, in px, on the test pairs: how big an upload's pair is drawn."""
    ink = images[:, 0] > 0.1
    rows, cols = ink.any(2), ink.any(1)

    def extent(a: np.ndarray) -> np.ndarray:
        return a.shape[1] - a[:, ::-1].argmax(1) - a.argmax(1)

    return int(np.median(np.maximum(extent(rows), extent(cols))))


def epochs_per_device(history: list[dict]) -> dict[str, int]:
    """How many epochs ran on each machine: a run goes on wherever one is at hand (a GPU had for minutes, 2 CPU cores),
    and every epoch's history entry names its own; those from before entries named it are counted as not recorded."""
    counts: dict[str, int] = {}
    for h in history:
        name = h.get("device", "not recorded")
        counts[name] = counts.get(name, 0) + 1
    return counts


def build_entry(model: CapsNet, ckpt: dict, net: Path, dec: Path, worst: dict, test: dict, rule: dict, pair_box: int) -> dict:
    cfg = model.cfg
    args = ckpt.get("args", {})
    common = described(model, {FILE: net, DECODER: dec}, dec, worst)
    return {
        "name": NAME,
        "version": f"{ckpt.get('epoch', 0)}ep-{sha256(net)[:8]}",
        "paper": "Sabour, Frosst & Hinton 2017, section 6 (MultiMNIST)",
        **common,
        "input": {
            **common["input"],
            "pair_box": pair_box,  # an upload's two digits are scaled so that their ink's longer side is this (the service)
            "max_shift": MAX_SHIFT,  # how pairs are made (model/multimnist.py); the service's random test pairs follow it
            "mnist_digit_box": MNIST_DIGIT_BOX,  # each digit of a pair is an MNIST digit: two written apart are laid over so
        },
        "outputs": {
            "lengths": ["N", cfg.num_classes],
            "poses": ["N", cfg.num_classes, cfg.digit_dim],
            "reconstructions": ["N", 2, 1, cfg.image_size, cfg.image_size],
        },
        "reconstructions": "the decoder on the two longest capsules, longest first",
        "decoder": {"file": DECODER, **common["decoder"]},
        "onnx": {
            "opset": OPSET,
            "dynamic_axes": {"batch": 0},
            "weights": f"{FILE}: float16 where a tensor holds {HALF_MIN_ELEMENTS} values or more, cast to float32 as the file "
            f"loads (the graph computes in float32); {DECODER}: float32",
        },
        "test": {**test, "measured_with": f"onnxruntime CPUExecutionProvider on weights/{FILE}"},
        "second_digit": rule,
        "data": (
            f"MultiMNIST made on the fly as the paper says: each digit on a 36x36 canvas, shifted up to {MAX_SHIFT} px each way, "
            "overlaid on a digit of another class, added and clipped to [0,1]; training pairs from MNIST's 60k training "
            f"digits, test pairs from the 10k test digits only (seed {TEST_SEED})"
        ),
        "training": {
            "epochs": int(ckpt.get("epoch", 0)),
            "pairs_seen": int(ckpt.get("pairs_seen", 0)),
            "pairs_per_epoch": args.get("pairs_per_epoch"),
            "single_share_per_epoch": [h.get("single_share", 0.0) for h in ckpt.get("history", [])],
            "bf16_autocast_per_epoch": [h.get("bf16", False) for h in ckpt.get("history", [])],
            "started_from": ckpt.get("started_from", args.get("init")),  # the run's first start, through every resume
            "optimizer": "Adam",
            "lr": args.get("lr"),
            "lr_decay_per_epoch": args.get("lr_decay"),
            "lr_next": ckpt["history"][-1]["lr"] if ckpt.get("history") else args.get("lr"),  # where a resumed run goes on
            "batch_size": args.get("batch_size"),
            "batch_size_per_epoch": [h.get("batch_size") for h in ckpt.get("history", [])],  # None: not recorded (128)
            "weight_average_decay": args.get("ema_decay"),
            "exported_weights": "weight average" if ckpt.get("best_weights") == "ema" else "the trained weights",
            "train_seconds": round(float(ckpt.get("train_seconds", 0.0)), 1),
            "exported_on": hardware(),
            "epochs_per_device": epochs_per_device(ckpt.get("history", [])),
            "torch": torch.__version__,
            "history": ckpt.get("history", []),
        },
        "deviations_from_paper": [
            "Started from the MNIST network's weights (model/train_multimnist.py: the convolutions as they are, each 10x10 "
            "primary position's W_ij from the 6x6 position that sees the same part of a centred digit, scaled by 1152/3200; the "
            "decoder's drawing centred on the canvas); the paper trains from scratch.",
            f"Trained on {int(ckpt.get('pairs_seen', 0)):,} images, not the paper's 60M pairs.",
            "A share of the training images hold one digit alone (training.single_share_per_epoch; the margin loss then asks for "
            "that digit only, and there is no second reconstruction to learn), so that a lone digit is answered as one rather "
            "than with an invented second: the paper trains on pairs only.",
            "Scored on 10,000 fixed test pairs, not the paper's 1,000 partners for each test digit.",
        ],
    }


def main(argv: list[str] | None = None) -> None:
    log_to_console()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", default="checkpoints/multimnist/best.pt", help="training checkpoint to export")
    p.add_argument("--out", default="weights", help="directory for the ONNX files and the model card")
    p.add_argument("--data", default=MNIST_DIR, help="MNIST directory (the test digits)")
    p.add_argument("--pairs", type=int, default=10_000, help="fixed test pairs to score")
    p.add_argument(
        "--min-gain",
        type=float,
        default=MIN_GAIN,
        help="write only when both digits are read right on this much more of the pairs than the committed files score on the "
        "same pairs (none committed: 0)",
    )
    args = p.parse_args(argv)

    ckpt = torch.load(args.checkpoint, map_location="cpu", weights_only=False)
    model = CapsNet(CONFIG)
    model.load_state_dict(checkpoint_weights(ckpt))
    model.eval()
    out = Path(args.out)
    card_path = out / "model-card.json"
    card = json.loads(card_path.read_text())
    # staged beside the committed files (the same filesystem), so that each replaces its old self in one rename
    with tempfile.TemporaryDirectory(dir=out, prefix=".export-") as staging:
        net, dec = export(model, Path(staging))
        worst = parity(model, net, dec)
        log.info("parity with PyTorch, max abs diff: %s", worst)

        _, _, xte, yte = load_tensors(args.data, limit=1)
        pairs = fixed_test_pairs(xte, yte, args.pairs)
        out_pairs = run_onnx(net, pairs.image.numpy())
        test = score(out_pairs, pairs.digits.numpy(), pairs.labels.numpy())
        log.info("onnxruntime on %d test pairs: %s", args.pairs, test)
        committed = _committed_score(out, card, pairs)
        if test["both_right"] < committed + args.min_gain:
            raise SystemExit(
                f"both digits right on {test['both_right']:.2%} of the pairs, against {committed:.2%} for the committed files on "
                f"the same pairs: under the {args.min_gain:.1%} gain that a new version needs, not written"
            )
        singles = place(xte[: args.pairs], torch.Generator().manual_seed(TEST_SEED + 1)).numpy()
        rule = second_digit_rule(out_pairs["lengths"], run_onnx(net, singles)["lengths"])
        log.info("one digit or two: %s", rule)
        card["multimnist"] = build_entry(model, ckpt, net, dec, worst, test, rule, pair_box(pairs.image.numpy()))
        staged_card = Path(staging) / card_path.name
        staged_card.write_text(json.dumps(card, indent=1) + "\n")
        for f in (net, dec, staged_card):
            os.replace(f, out / f.name)
    log.info("wrote %s, %s and the card's multimnist entry", out / FILE, out / DECODER)


def _committed_score(out: Path, card: dict, pairs) -> float:
    """Both digits right for the files in `out` on the same pairs (0 with none): the figure a new export must beat."""
    if "multimnist" not in card or not (out / FILE).exists():
        return 0.0
    got = run_onnx(out / FILE, pairs.image.numpy())
    return score(got, pairs.digits.numpy(), pairs.labels.numpy())["both_right"]


if __name__ == "__main__":
    main()
