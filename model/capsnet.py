"""CapsNet, as in "Dynamic Routing Between Capsules" (Sabour, Frosst & Hinton, 2017), top to bottom.

    image [B,1,28,28]
      -> Conv1 256@9x9 ReLU                     [B,256,20,20]
      -> PrimaryCaps 32 x 8-D @9x9 stride 2     [B,1152,8]      (1152 = 32 channels x 6 x 6; output `primary`)
      -> DigitCaps 10 x 16-D, routing x3        [B,10,16]
      -> lengths                                [B,10]
      -> decoder on the masked DigitCaps        [B,1,28,28]

Primary capsule index i = channel * 36 + row * 6 + col; the exported `coupling` output uses it.

Deviations from the paper, stated here and in the model card:
- In routing iterations before the last, the agreement and the coupling coefficients are computed
  on a detached u_hat (gradients flow through u_hat only in the final iteration). This is the
  common practice of reproductions; it saves memory and time and does not change the forward pass.
- The squash has an epsilon inside the square root so that a zero vector maps to zero with finite
  gradients; on any vector of norm >> 1e-4 it equals the paper's function to float precision.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn


@dataclass(frozen=True)
class CapsNetConfig:
    """Every size of the network; the model card is written from this, the service reads the card."""

    image_size: int = 28
    conv1_channels: int = 256
    conv1_kernel: int = 9
    primary_channels: int = 32  # capsule types
    primary_dim: int = 8
    primary_kernel: int = 9
    primary_stride: int = 2
    # "full": the paper's 9x9 convolution, 256 -> 256 channels (97% of the network's multiply-adds on a 36x36 canvas);
    # "separable": a 9x9 filter per channel, then a 1x1 mixing of channels, the same primary capsules at ~1/60 the cost
    primary_conv: str = "full"
    num_classes: int = 10
    digit_dim: int = 16
    routing_iterations: int = 3
    decoder_hidden: tuple[int, int] = (512, 1024)
    m_plus: float = 0.9
    m_minus: float = 0.1
    lambda_: float = 0.5
    reconstruction_weight: float = 0.0005

    @property
    def primary_grid(self) -> int:
        conv1_out = self.image_size - self.conv1_kernel + 1  # 20
        return (conv1_out - self.primary_kernel) // self.primary_stride + 1  # 6

    @property
    def num_primary(self) -> int:
        return self.primary_channels * self.primary_grid**2  # 1152

    def as_dict(self) -> dict:
        d = asdict(self)
        d["decoder_hidden"] = list(self.decoder_hidden)
        d["primary_grid"] = self.primary_grid
        d["num_primary_capsules"] = self.num_primary
        return d


def squash(s: Tensor, dim: int = -1, eps: float = 1e-8) -> Tensor:
    """v = |s|^2 / (1 + |s|^2) * s / |s|, written so that s = 0 gives v = 0 and a finite gradient.

    The floor is a clamp, not `sq + eps`: torch.onnx's graph optimiser folds `x + 1e-8` away as an
    add of zero, which left the exported squash at 0/0 = NaN for an all-zero capsule (an INT8 model
    produced one); Max(sq, eps) survives export.
    """
    sq = (s * s).sum(dim, keepdim=True)
    return s * (sq / ((1.0 + sq) * torch.sqrt(sq.clamp_min(eps))))


class PrimaryCaps(nn.Module):
    def __init__(self, cfg: CapsNetConfig) -> None:
        super().__init__()
        self.cfg = cfg
        out = cfg.primary_channels * cfg.primary_dim
        if cfg.primary_conv == "separable":
            self.conv: nn.Module = nn.Sequential(
                nn.Conv2d(cfg.conv1_channels, cfg.conv1_channels, cfg.primary_kernel, stride=cfg.primary_stride, groups=cfg.conv1_channels),
                nn.Conv2d(cfg.conv1_channels, out, 1),
            )
        elif cfg.primary_conv == "full":
            self.conv = nn.Conv2d(cfg.conv1_channels, out, cfg.primary_kernel, stride=cfg.primary_stride)
        else:
            raise ValueError(f"primary_conv: 'full' or 'separable', not {cfg.primary_conv!r}")

    def forward(self, x: Tensor) -> Tensor:
        c, g = self.cfg, self.cfg.primary_grid
        u = self.conv(x)  # [B,256,6,6], channel = type * 8 + component
        u = u.view(-1, c.primary_channels, c.primary_dim, g, g)  # [B,32,8,6,6]
        u = u.permute(0, 1, 3, 4, 2).reshape(-1, c.num_primary, c.primary_dim)  # [B,1152,8]
        return squash(u)


class DigitCaps(nn.Module):
    """Capsules j = 0..9 fed by the 1152 primary capsules i through one W_ij (8 -> 16) per pair."""

    def __init__(self, cfg: CapsNetConfig) -> None:
        super().__init__()
        self.cfg = cfg
        # W[i] = [W_i0 | W_i1 | ... | W_i9]: child i's ten 8x16 matrices side by side, so that
        # u_hat_j|i = u_i W_ij for all j is one row of a batched matmul: [1152,8,10*16]
        self.W = nn.Parameter(0.01 * torch.randn(cfg.num_primary, cfg.primary_dim, cfg.num_classes * cfg.digit_dim))

    def forward(self, u: Tensor) -> tuple[Tensor, Tensor]:
        """u [B,1152,8] -> v [B,10,16] and the final coupling coefficients c [B,10,1152]."""
        *_, last = self.route(self.predictions(u), self.cfg.routing_iterations)  # the trained iterations; keep the last
        return last

    def predictions(self, u: Tensor) -> Tensor:
        """u [B,1152,8] -> u_hat [B,10,1152,16]: what each child i predicts for each parent j."""
        c = self.cfg
        n, parents, children, dim = u.shape[0], c.num_classes, c.num_primary, c.digit_dim
        # u_hat_j|i = u_i W_ij for every pair, as one batched matmul over the children i
        # (an einsum here ran 13x slower in onnxruntime than this MatMul)
        u_hat = torch.matmul(u.transpose(0, 1), self.W)  # [1152,B,8] @ [1152,8,160] -> [1152,B,160]
        # contiguous per parent, so that routing is two batched matmuls
        return u_hat.view(children, n, parents, dim).permute(1, 2, 0, 3).contiguous()  # [B,10,1152,16]

    def route(self, u_hat: Tensor, iterations: int) -> Iterator[tuple[Tensor, Tensor]]:
        """Dynamic routing (the paper's Procedure 1): yields v [B,10,16] and the coupling c [B,10,1152] of each iteration,
        so that model/routing.py can show every step while forward keeps the last."""
        u_hat_routing = u_hat.detach()  # see the module docstring: no gradient in inner iterations
        b = torch.zeros(u_hat.shape[:3], device=u_hat.device, dtype=u_hat.dtype)  # [B,10,1152]
        for r in range(iterations):
            c = torch.softmax(b, dim=1)  # [B,10,1152]: each child i shares itself among the 10 parents
            last = r == iterations - 1
            uh = u_hat if last else u_hat_routing
            s = torch.matmul(c.unsqueeze(2), uh).squeeze(2)  # [B,10,1,1152] @ [B,10,1152,16] -> [B,10,16]
            v = squash(s)  # [B,10,16]
            yield v, c
            if not last:
                b = b + agreement(uh, v)


def agreement(u_hat: Tensor, v: Tensor) -> Tensor:
    """u_hat [B,10,1152,16], v [B,10,16] -> u_hat_j|i . v_j [B,10,1152]: what routing adds to the logits b_ij."""
    return torch.matmul(u_hat, v.unsqueeze(-1)).squeeze(-1)


class Decoder(nn.Module):
    def __init__(self, cfg: CapsNetConfig) -> None:
        super().__init__()
        self.cfg = cfg
        h1, h2 = cfg.decoder_hidden
        self.net = nn.Sequential(
            nn.Linear(cfg.num_classes * cfg.digit_dim, h1),
            nn.ReLU(inplace=True),
            nn.Linear(h1, h2),
            nn.ReLU(inplace=True),
            nn.Linear(h2, cfg.image_size**2),
            nn.Sigmoid(),
        )

    def forward(self, v: Tensor, digit: Tensor) -> Tensor:
        """v [B,10,16], digit [B] int -> image [B,1,28,28] from v with every capsule but `digit` zeroed."""
        mask = F.one_hot(digit, self.cfg.num_classes).to(v.dtype).unsqueeze(-1)  # [B,10,1]
        x = self.net((v * mask).flatten(1))  # [B,784]
        return x.view(-1, 1, self.cfg.image_size, self.cfg.image_size)


class CapsNet(nn.Module):
    def __init__(self, cfg: CapsNetConfig | None = None) -> None:
        super().__init__()
        self.cfg = cfg or CapsNetConfig()
        c = self.cfg
        self.conv1 = nn.Conv2d(1, c.conv1_channels, c.conv1_kernel)
        self.primary = PrimaryCaps(c)
        self.digit = DigitCaps(c)
        self.decoder = Decoder(c)

    def forward(self, x: Tensor, target: Tensor | None = None) -> dict[str, Tensor]:
        """x [B,1,28,28] in [0,1]; the decoder sees `target` in training, the longest capsule otherwise."""
        h = F.relu(self.conv1(x))  # [B,256,20,20]
        u = self.primary(h)  # [B,1152,8]
        v, c = self.digit(u)  # [B,10,16], [B,10,1152]
        lengths = torch.sqrt((v * v).sum(-1) + 1e-12)  # [B,10]
        digit = target if target is not None else lengths.argmax(-1)
        recon = self.decoder(v, digit)  # [B,1,28,28]
        return {"lengths": lengths, "poses": v, "reconstruction": recon, "coupling": c.transpose(1, 2), "primary": u}


def margin_loss(lengths: Tensor, target: Tensor, cfg: CapsNetConfig) -> Tensor:
    """L_k = T_k max(0, m+ - |v_k|)^2 + lambda (1 - T_k) max(0, |v_k| - m-)^2, summed over k, mean over batch.

    `target`: class indices [B], or T itself [B,10] (MultiMNIST: a 1 at each digit present)."""
    t = target.to(lengths.dtype) if target.dim() == 2 else F.one_hot(target, cfg.num_classes).to(lengths.dtype)
    present = t * F.relu(cfg.m_plus - lengths) ** 2
    absent = cfg.lambda_ * (1.0 - t) * F.relu(lengths - cfg.m_minus) ** 2
    return (present + absent).sum(-1).mean()


def reconstruction_loss(recon: Tensor, image: Tensor, cfg: CapsNetConfig) -> Tensor:
    """Sum of squared pixel errors per image, scaled by 0.0005 so it does not dominate the margin loss."""
    return cfg.reconstruction_weight * ((recon - image) ** 2).flatten(1).sum(-1).mean()


def total_loss(out: dict[str, Tensor], image: Tensor, target: Tensor, cfg: CapsNetConfig) -> tuple[Tensor, Tensor, Tensor]:
    m = margin_loss(out["lengths"], target, cfg)
    r = reconstruction_loss(out["reconstruction"], image, cfg)
    return m + r, m, r


def count_parameters(model: nn.Module, include_decoder: bool = True) -> int:
    return sum(p.numel() for n, p in model.named_parameters() if include_decoder or not n.startswith("decoder."))
