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
INK = 0.1  # what counts as ink for a composite's box, as the service's preprocessing counts it
SERVED_BOX = 23  # the longer side of the ink an upload or a drawing is scaled to by the service (the card's pair_box)
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


def make_pairs(
    images: Tensor,
    labels: Tensor,
    base: Tensor,
    generator: torch.Generator | None,
    single_share: float = 0.0,
    drawn: Tensor | None = None,
    drawn_rows: Tensor | None = None,
) -> Pairs:
    """Composites of images[base] each overlaid on a random digit of another class from the same split; a `single_share`
    of them keep the first digit alone (second label -1, second digit blank). The composites `drawn_rows` [B] marks are
    made of `drawn` instead: the same digits redrawn with a pen (model/pen_strokes.pen_digits), both of them, as a person
    draws a pair on the page's canvas."""
    other = partners(labels[base], labels, generator)
    first, second_digit = images[base], images[other]
    if drawn is not None and drawn_rows is not None:
        pen = drawn_rows.view(-1, 1, 1, 1)
        first, second_digit = torch.where(pen, drawn[base], first), torch.where(pen, drawn[other], second_digit)
    a, b = place(first, generator), place(second_digit, generator)
    second = labels[other].clone()
    if single_share > 0:
        alone = torch.rand(len(base), generator=generator, device=images.device) < single_share
        b[alone] = 0.0
        second[alone] = -1
    return Pairs(image=(a + b).clamp_(0.0, 1.0), digits=torch.stack([a, b], dim=1), labels=torch.stack([labels[base], second], dim=1))


def ink_box(image: Tensor) -> Tensor:
    """[B,1,S,S] -> [B]: the longer side of each image's ink box in px (0 for a blank image)."""
    ink = image[:, 0] > INK  # [B,S,S]
    side = ink.shape[-1]
    span = []
    for hit in (ink.any(2), ink.any(1)):  # [B,S]: rows, then columns, holding ink
        first = hit.float().argmax(1)
        last = side - 1 - hit.flip(1).float().argmax(1)
        span.append(torch.where(hit.any(1), last - first + 1, torch.zeros_like(first)))
    return torch.maximum(*span).float()


def as_served(pairs: Pairs, box: Tensor) -> Pairs:
    """Each composite as the service hands it to the network: its ink's longer side scaled to `box` [B] px and its centre
    of mass put at the canvas's centre (service/inputs/preprocess.fit_and_centre), the digits alone moved with it.

    An upload or a drawing has no canvas to keep: the service scales whatever ink it finds, so a lone digit arrives larger
    than MNIST drew it and a pair smaller. Trained on both, the network reads them where they land."""
    b, _, side, _ = pairs.image.shape
    stack = torch.cat([pairs.image, pairs.digits.flatten(1, 2)], 1)  # [B,3,S,S]
    scale = (box / ink_box(pairs.image).clamp(min=1.0)).view(b, 1, 1)
    weight = pairs.image[:, 0]
    mass = weight.sum((1, 2)).clamp(min=1e-6)
    at = torch.arange(side, dtype=weight.dtype, device=weight.device)
    cy = (weight.sum(2) * at).sum(1).view(b, 1, 1) / mass.view(b, 1, 1)
    cx = (weight.sum(1) * at).sum(1).view(b, 1, 1) / mass.view(b, 1, 1)
    centre = (side - 1) / 2.0
    y = cy + (at.view(1, side, 1) - centre) / scale  # [B,S,1]: the input row each output row samples
    x = cx + (at.view(1, 1, side) - centre) / scale  # [B,1,S]
    grid = torch.stack([x.expand(b, side, side), y.expand(b, side, side)], -1)
    grid = (2.0 * grid + 1.0) / side - 1.0  # pixel centres -> grid_sample's [-1, 1] (align_corners=False)
    out = F.grid_sample(stack, grid, mode="bilinear", padding_mode="zeros", align_corners=False).clamp_(0.0, 1.0)
    return Pairs(image=out[:, :1].contiguous(), digits=out[:, 1:].unsqueeze(2).contiguous(), labels=pairs.labels)


def make_training_pairs(
    images: Tensor,
    labels: Tensor,
    base: Tensor,
    generator: torch.Generator | None,
    single_share: float,
    served_share: float,
    drawn: Tensor | None = None,
    drawn_share: float = 0.0,
) -> Pairs:
    """make_pairs, a `drawn_share` of them made of `drawn` (the digits redrawn with the page's pen), then a `served_share`
    of the composites, and every drawn one (a drawing always reaches the network so), rescaled as the service would hand
    them over (as_served), the box jittered a pixel each way as the service's rounding and anti-aliasing move it."""
    n = len(base)
    rows = None
    if drawn is not None and drawn_share > 0:
        rows = torch.rand(n, generator=generator, device=images.device) < drawn_share
    pairs = make_pairs(images, labels, base, generator, single_share, drawn, rows)
    if served_share <= 0 and rows is None:
        return pairs
    pick = torch.rand(n, generator=generator, device=images.device) < served_share
    if rows is not None:
        pick |= rows
    box = SERVED_BOX + torch.randint(-1, 2, (n,), generator=generator, device=images.device).float()
    served = as_served(pairs, box)
    keep = pick.view(n, 1, 1, 1)
    return Pairs(
        image=torch.where(keep, served.image, pairs.image),
        digits=torch.where(keep.unsqueeze(1), served.digits, pairs.digits),
        labels=pairs.labels,
    )


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
