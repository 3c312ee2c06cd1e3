"""MultiMNIST as the paper makes it (section 6): two digits of different classes on one 36x36 canvas.

Each digit is padded from 28x28 to 36x36 and shifted by up to 4 px each way (zero fill, so no ink is cut),
the two are added and clipped to [0, 1]. Training pairs are drawn on the fly from the training set, every
batch new (the paper draws 1,000 partners per digit, 60M pairs; drawing them afresh sees as many without
storing any); the test pairs come from the test set only, from a fixed seed, so every run scores the same
10,000 pairs. Nothing generated is written to disk.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from model.capsnet import CapsNetConfig
from model.data import random_shift

CANVAS = 36
MAX_SHIFT = 4
TEST_SEED = 2017  # the 10,000 test pairs every evaluation and the model card use
CONFIG = CapsNetConfig(image_size=CANVAS)  # the MNIST network on 36x36: primary capsules on a 10x10 grid (3200)


@dataclass
class Pairs:
    """A batch of composites and what the network must find in them."""

    image: Tensor  # [B,1,36,36] the two digits added and clipped
    digits: Tensor  # [B,2,1,36,36] each digit alone, where it sits in the composite
    labels: Tensor  # [B,2] int64, two different classes; the second -1 where the image holds one digit only


def place(x: Tensor, generator: torch.Generator | None) -> Tensor:
    """[B,1,28,28] -> [B,1,36,36]: centred on the canvas, then shifted up to 4 px each way."""
    pad = (CANVAS - x.shape[-1]) // 2
    return random_shift(F.pad(x, (pad,) * 4), MAX_SHIFT, generator)


def partners(labels: Tensor, pool: Tensor, generator: torch.Generator | None) -> Tensor:
    """For each label, the index of a random image in `pool` (labels) of a different class."""
    n = len(labels)
    idx = torch.randint(0, len(pool), (n,), generator=generator, device=pool.device)
    same = pool[idx] == labels
    while same.any():  # one in ten collides; each redraw leaves a tenth of those
        idx[same] = torch.randint(0, len(pool), (int(same.sum()),), generator=generator, device=pool.device)
        same = pool[idx] == labels
    return idx


def make_pairs(images: Tensor, labels: Tensor, base: Tensor, generator: torch.Generator | None, single_share: float = 0.0) -> Pairs:
    """Composites of images[base] each overlaid on a random digit of another class from the same split; a `single_share`
    of them keep the first digit alone (second label -1, second digit blank)."""
    other = partners(labels[base], labels, generator)
    a, b = place(images[base], generator), place(images[other], generator)
    second = labels[other].clone()
    if single_share > 0:
        alone = torch.rand(len(base), generator=generator, device=images.device) < single_share
        b[alone] = 0.0
        second[alone] = -1
    return Pairs(image=(a + b).clamp_(0.0, 1.0), digits=torch.stack([a, b], dim=1), labels=torch.stack([labels[base], second], dim=1))


def fixed_test_pairs(images: Tensor, labels: Tensor, count: int = 10_000) -> Pairs:
    """The fixed test pairs: test digit i (cycling) with a seeded partner from the test set."""
    gen = torch.Generator().manual_seed(TEST_SEED)
    base = torch.arange(count) % len(images)
    return make_pairs(images, labels, base, gen)


def two_hot(labels: Tensor, num_classes: int = 10) -> Tensor:
    """[B,2] -> [B,10] with a 1 at each digit present (a label -1 is none): the margin loss's T_k."""
    present = (labels >= 0).unsqueeze(-1)
    return (F.one_hot(labels.clamp(min=0), num_classes) * present).amax(1).to(torch.float32)


def both_right(lengths: Tensor, labels: Tensor) -> tuple[Tensor, Tensor]:
    """The paper's score: the two longest capsules are the two digits. Returns (both right, at least one right) per pair."""
    top2 = lengths.topk(2, dim=-1).indices  # [B,2]
    hit = (top2.unsqueeze(-1) == labels.unsqueeze(1)).any(1)  # [B,2]: each true digit among the two longest
    return hit.all(-1), hit.any(-1)
