"""The network's parts behave as the paper defines them."""

from __future__ import annotations

import torch

from model.capsnet import CapsNet, CapsNetConfig, DigitCaps, count_parameters, margin_loss, reconstruction_loss, squash, total_loss


def test_squash_shrinks_below_one_and_keeps_direction():
    s = torch.randn(64, 16) * torch.logspace(-3, 3, 64).unsqueeze(1)
    v = squash(s)
    n_s, n_v = s.norm(dim=-1), v.norm(dim=-1)
    # below 1; for |s| in the thousands |s|^2/(1+|s|^2) is within float32's rounding of 1
    assert (n_v <= 1).all() and (n_v[n_s < 100] < 1).all()
    cos = (s * v).sum(-1) / (n_s * n_v)
    assert torch.allclose(cos, torch.ones_like(cos), atol=1e-5)
    # the paper's formula |s|^2/(1+|s|^2) for the length
    assert torch.allclose(n_v, n_s**2 / (1 + n_s**2), rtol=1e-4)


def test_squash_of_zero_is_zero_with_finite_gradient():
    s = torch.zeros(3, 8, requires_grad=True)
    v = squash(s)
    assert torch.equal(v, torch.zeros_like(v))
    v.sum().backward()
    assert torch.isfinite(s.grad).all()


def test_coupling_sums_to_one_over_parents():
    caps = DigitCaps(CapsNetConfig())
    u = squash(torch.randn(4, 1152, 8))
    v, c = caps(u)
    assert v.shape == (4, 10, 16) and c.shape == (4, 10, 1152)
    assert torch.allclose(c.sum(1), torch.ones(4, 1152), atol=1e-5)
    assert (c.max(1).values > 0.1 + 1e-4).any(), "routing should move coupling away from uniform"


def test_example_output_does_not_depend_on_batch_mates():
    torch.manual_seed(0)
    model = CapsNet().eval()
    x = torch.rand(5, 1, 28, 28)
    with torch.no_grad():
        alone = model(x[2:3])
        together = model(x)
        shuffled = model(x[[4, 2, 0, 1, 3]])
    for k in ("lengths", "poses", "coupling", "reconstruction"):
        assert torch.allclose(alone[k][0], together[k][2], atol=1e-5), k
        assert torch.allclose(shuffled[k][1], together[k][2], atol=1e-5), k


def test_shapes_and_parameter_counts_match_the_paper():
    model = CapsNet()
    out = model.eval()(torch.rand(2, 1, 28, 28))
    assert out["lengths"].shape == (2, 10)
    assert out["poses"].shape == (2, 10, 16)
    assert out["reconstruction"].shape == (2, 1, 28, 28)
    assert out["coupling"].shape == (2, 1152, 10)
    assert count_parameters(model) == 8_215_568
    assert count_parameters(model, include_decoder=False) == 6_804_224


def test_decoder_sees_only_the_masked_capsule():
    torch.manual_seed(1)
    model = CapsNet().eval()
    v = torch.randn(1, 10, 16)
    other = v.clone()
    other[0, 5] = torch.randn(16)  # change a capsule that is masked out
    digit = torch.tensor([3])
    assert torch.allclose(model.decoder(v, digit), model.decoder(other, digit))
    assert not torch.allclose(model.decoder(v, digit), model.decoder(v, torch.tensor([5])))


def test_margin_loss_matches_hand_computation():
    cfg = CapsNetConfig()
    lengths = torch.tensor([[0.95, 0.5, 0.05, 0.2, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
    target = torch.tensor([1])
    # present (k=1): (0.9-0.5)^2 = 0.16; absent: 0.5*((0.95-0.1)^2 + (0.2-0.1)^2) = 0.5*(0.7225+0.01)
    expected = 0.16 + 0.5 * (0.7225 + 0.01)
    assert abs(margin_loss(lengths, target, cfg).item() - expected) < 1e-6
    # a confident right answer costs nothing
    perfect = torch.tensor([[0.0, 0.95] + [0.05] * 8])
    assert margin_loss(perfect, target, cfg).item() == 0.0


def test_reconstruction_loss_is_scaled_sum_of_squares():
    cfg = CapsNetConfig()
    img = torch.zeros(2, 1, 28, 28)
    recon = torch.full((2, 1, 28, 28), 0.5)
    assert abs(reconstruction_loss(recon, img, cfg).item() - 0.0005 * 784 * 0.25) < 1e-6


def test_a_few_training_steps_lower_the_loss():
    torch.manual_seed(0)
    model = CapsNet()
    x = torch.zeros(16, 1, 28, 28)
    y = torch.arange(16) % 4
    for i in range(16):  # four easy classes: a bright bar in a different place
        x[i, 0, 4 + 5 * int(y[i]) : 8 + 5 * int(y[i]), 6:22] = 1.0
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    losses = []
    for _ in range(6):
        loss, _, _ = total_loss(model(x, y), x, y, model.cfg)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0], losses
