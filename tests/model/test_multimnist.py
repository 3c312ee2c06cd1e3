"""MultiMNIST as the paper makes it, the warm start from the MNIST network, training and export of the pair network."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

from model.capsnet import CapsNet, CapsNetConfig, margin_loss
from model.multimnist import (
    CANVAS,
    CONFIG,
    MAX_SHIFT,
    SERVED_BOX,
    as_served,
    both_right,
    fixed_test_pairs,
    ink_box,
    make_pairs,
    make_training_pairs,
    two_hot,
)
from model.train_multimnist import forward_pairs, init_from_mnist, parse_args, train
from tests.conftest import WEIGHTS, fewest
from tests.model.test_data import write_idx


def digits(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """MNIST-shaped digits: ink only inside the central 20x20 box, as MNIST's, labels 0-9 in turn."""
    rng = np.random.default_rng(seed)
    x = np.zeros((n, 1, 28, 28), np.float32)
    for i in range(n):
        r, c = rng.integers(4, 14, 2)
        x[i, 0, r : r + 10, c : c + 10] = rng.uniform(0.2, 1.0, (10, 10))
    return torch.from_numpy(x), torch.arange(n) % 10


def test_pairs_are_two_different_digits_added_and_clipped_with_no_ink_lost() -> None:
    x, y = digits(200)
    p = make_pairs(x, y, torch.arange(200), torch.Generator().manual_seed(1))
    assert p.image.shape == (200, 1, CANVAS, CANVAS) and p.digits.shape == (200, 2, 1, CANVAS, CANVAS)
    assert (p.labels[:, 0] != p.labels[:, 1]).all()
    assert torch.equal(p.labels[:, 0], y)
    assert torch.allclose(p.image, (p.digits[:, 0] + p.digits[:, 1]).clamp(0, 1))
    assert torch.allclose(p.digits[:, 0].sum((1, 2, 3)), x.sum((1, 2, 3)), rtol=1e-5), "a shift cut ink off"
    # each digit is shifted by up to 4 px from the canvas centre, and by more than 0 for some
    centre = torch.tensor([(CANVAS - 1) / 2] * 2)
    grid = torch.arange(CANVAS, dtype=torch.float32)
    d = p.digits[:, 0, 0]
    mass = d.sum((1, 2))
    cy, cx = (d.sum(2) * grid).sum(1) / mass, (d.sum(1) * grid).sum(1) / mass
    x_mass = x[:, 0].sum((1, 2))
    g28 = torch.arange(28, dtype=torch.float32)
    oy = (x[:, 0].sum(2) * g28).sum(1) / x_mass + (CANVAS - 28) / 2 - centre[0]
    ox = (x[:, 0].sum(1) * g28).sum(1) / x_mass + (CANVAS - 28) / 2 - centre[1]
    shift = torch.stack([cy - centre[0] - oy, cx - centre[1] - ox], 1)
    assert shift.abs().max() <= MAX_SHIFT + 1e-4 and shift.abs().max() >= MAX_SHIFT - 1


def test_served_composites_land_where_the_service_puts_an_upload() -> None:
    """as_served scales a composite as service/inputs/preprocess.fit_and_centre does an upload or a drawing: the ink's
    longer side to the box, the centre of mass at the canvas centre; the digits alone move with it."""
    from service.inputs.preprocess import fit_and_centre

    x, y = digits(64, seed=3)
    pairs = make_pairs(x, y, torch.arange(64), torch.Generator().manual_seed(2), single_share=0.3)
    served = as_served(pairs, torch.full((64,), float(SERVED_BOX)))
    # the box a pixel or two over: bilinear sampling spills a faint edge past the ink where the service's resize does not
    assert ((ink_box(served.image) - SERVED_BOX) >= 0).all() and (ink_box(served.image) - SERVED_BOX).max() <= 2
    grid = torch.arange(CANVAS, dtype=torch.float32)
    mass = served.image[:, 0].sum((1, 2))
    cy = (served.image[:, 0].sum(2) * grid).sum(1) / mass
    cx = (served.image[:, 0].sum(1) * grid).sum(1) / mass
    assert (cy - (CANVAS - 1) / 2).abs().max() < 0.5 and (cx - (CANVAS - 1) / 2).abs().max() < 0.5
    assert torch.allclose(served.digits.sum(1).clamp(0, 1).sum((1, 2, 3)), served.image.sum((1, 2, 3)), rtol=0.1)
    for i in range(8):  # the service's own code on the same composite draws nearly the same picture
        want = fit_and_centre(pairs.image[i, 0].numpy(), CANVAS, SERVED_BOX)
        assert np.abs(want - served.image[i, 0].numpy()).sum() < 0.35 * want.sum()


def test_a_share_of_training_composites_arrive_as_served() -> None:
    x, y = digits(400, seed=4)
    made = [make_training_pairs(x, y, torch.arange(400), torch.Generator().manual_seed(5), 0.0, share) for share in (0.0, 0.5, 1.0)]
    plain = make_pairs(x, y, torch.arange(400), torch.Generator().manual_seed(5), 0.0)
    assert torch.equal(made[0].image, plain.image)
    near = [(((ink_box(m.image) - SERVED_BOX) >= -1) & ((ink_box(m.image) - SERVED_BOX) <= 3)).float().mean().item() for m in made]
    assert near[2] == 1.0 and near[0] < 0.1 and 0.35 < near[1] < 0.65, near


def test_a_share_of_training_composites_are_drawn_with_the_pen_and_arrive_as_a_drawing_does() -> None:
    """--drawn-share: both digits of a composite from the pen's redrawing of them, and served as the service serves a
    drawing; without it the pairs are the ones made before (the same random draws)."""
    x, y = digits(400, seed=6)
    drawn = (x > 0).float() * 0.5  # stand-ins, told apart by their strength: a digit here reaches near 1
    gen = lambda: torch.Generator().manual_seed(7)  # noqa: E731
    none = make_training_pairs(x, y, torch.arange(400), gen(), 0.0, 0.2, drawn, 0.0)
    assert torch.equal(none.image, make_training_pairs(x, y, torch.arange(400), gen(), 0.0, 0.2).image)
    half = make_training_pairs(x, y, torch.arange(400), gen(), 0.0, 0.0, drawn, 0.5)
    pen = half.digits.amax((2, 3, 4)) <= 0.5 + 1e-6  # [B,2]: each digit alone, from the pen
    assert torch.equal(pen[:, 0], pen[:, 1]) and 0.35 < pen[:, 0].float().mean().item() < 0.65
    served = ((ink_box(half.image) - SERVED_BOX) >= -1) & ((ink_box(half.image) - SERVED_BOX) <= 3)
    assert served[pen[:, 0]].all() and served[~pen[:, 0]].float().mean() < 0.1


def test_test_pairs_are_fixed() -> None:
    x, y = digits(50)
    a, b = fixed_test_pairs(x, y, 30), fixed_test_pairs(x, y, 30)
    assert torch.equal(a.image, b.image) and torch.equal(a.labels, b.labels)


def test_both_right_means_the_two_longest_capsules_are_the_two_digits() -> None:
    lengths = torch.tensor([[0.9, 0.8, 0.1] + [0.0] * 7, [0.9, 0.1, 0.8] + [0.0] * 7, [0.1, 0.2, 0.3] + [0.0] * 7])
    labels = torch.tensor([[1, 0], [0, 1], [5, 6]])
    both, one = both_right(lengths, labels)
    assert both.tolist() == [True, False, False] and one.tolist() == [True, True, False]


def test_margin_loss_with_both_digits_present() -> None:
    cfg = CapsNetConfig()
    lengths = torch.zeros(1, 10)
    lengths[0, [2, 7]] = 0.95  # both present and long: only the absent ones count, and they are 0
    assert margin_loss(lengths, two_hot(torch.tensor([[2, 7]])), cfg).item() == 0.0
    lengths[0, 7] = 0.0  # the second digit's capsule silent: (0.9 - 0)^2
    assert abs(margin_loss(lengths, two_hot(torch.tensor([[2, 7]])), cfg).item() - 0.81) < 1e-6


def test_warm_start_maps_the_mnist_network_onto_the_canvas() -> None:
    import onnx
    from onnx import numpy_helper

    src = {i.name: numpy_helper.to_array(i) for i in onnx.load(str(WEIGHTS / "capsnet.onnx")).graph.initializer}
    model = CapsNet(CONFIG)
    init_from_mnist(model, WEIGHTS / "capsnet.onnx")
    assert np.array_equal(model.conv1.weight.detach().numpy(), src["conv1.weight"])
    w36 = model.digit.W.detach().view(32, 10, 10, 8, 160).numpy()
    w28 = src["digit.W"].reshape(32, 6, 6, 8, 160)
    scale = 1152 / 3200
    assert np.allclose(w36[:, 2:8, 2:8], scale * w28), "a centred digit meets the W_ij it met on MNIST"
    assert np.allclose(w36[:, 0, 0], scale * w28[:, 0, 0]) and np.allclose(w36[:, 9, 9], scale * w28[:, 5, 5])
    # the decoder draws the MNIST drawing in the middle of the canvas and nothing at the border
    with torch.no_grad():
        pose = torch.zeros(1, 10, 16)
        pose[0, 3] = 0.5
        drawn = model.decoder(pose, torch.tensor([3]))[0, 0]
    assert drawn[:4].max() < 1e-3 and drawn[:, :4].max() < 1e-3


def test_a_lighter_primary_convolution_keeps_digit_capsules_and_decoder_and_starts_afresh_where_shapes_differ() -> None:
    from dataclasses import replace

    torch.manual_seed(0)
    light = CapsNet(replace(CONFIG, primary_conv="separable", primary_channels=16))
    init_from_mnist(light, WEIGHTS / "capsnet.onnx")
    paper = CapsNet(CONFIG)
    init_from_mnist(paper, WEIGHTS / "capsnet.onnx")
    assert torch.equal(light.conv1.weight, paper.conv1.weight), "the stroke filters are the MNIST network's in both"
    assert light.digit.W.shape == (1600, 8, 160) and light.digit.W.abs().max() < 0.1, "W_ij fresh: 1600 children"
    with torch.no_grad():
        out = light(torch.rand(2, 1, CANVAS, CANVAS))
    assert out["lengths"].shape == (2, 10) and out["poses"].shape == (2, 10, 16) and out["reconstruction"].shape == (2, 1, 36, 36)

    def multiply_adds(net: CapsNet) -> int:
        grid = net.cfg.primary_grid**2
        return sum(m.weight.numel() * grid for m in net.primary.modules() if isinstance(m, torch.nn.Conv2d))

    assert multiply_adds(light) * 30 < multiply_adds(paper), "the primary convolution at a fraction of the paper's cost"
    with pytest.raises(ValueError, match="primary_conv"):
        CapsNet(replace(CONFIG, primary_conv="dilated"))


def test_forward_pairs_redraws_each_digit_from_its_own_capsule() -> None:
    torch.manual_seed(0)
    model = CapsNet(CONFIG).eval()
    x = torch.rand(3, 1, CANVAS, CANVAS)
    with torch.no_grad():
        out = forward_pairs(model, x)
        top2 = out["lengths"].topk(2, -1).indices
        for k in range(2):
            assert torch.allclose(out["reconstructions"][:, k], model.decoder(out["poses"], top2[:, k]), atol=1e-6)


def _mnist_dir(tmp_path, n_train: int = 40, n_test: int = 20):
    data = tmp_path / "data"
    data.mkdir()
    for n, stems in (
        (n_train, ("train-images-idx3-ubyte", "train-labels-idx1-ubyte")),
        (n_test, ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")),
    ):
        x, y = digits(n, seed=n)
        write_idx(data / stems[0], (x[:, 0].numpy() * 255).astype(np.uint8), 2051, gz=False)
        write_idx(data / stems[1], y.numpy().astype(np.uint8), 2049, gz=False)
    return data


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("multimnist")
    data, out = _mnist_dir(tmp), tmp / "ckpt"
    argv = ["--data", str(data), "--out", str(out), "--batch-size", "8", "--threads", "1", "--pairs-per-epoch", "16", "--eval-pairs", "10"]
    argv += ["--freeze", "conv1"]
    state = train(parse_args([*argv, "--epochs", "1"]))
    assert state["epoch"] == 1 and state["pairs_seen"] == 16
    resume = ["--epochs", "2", "--resume", str(out / "last.pt"), "--bf16", "--lr", "5e-4"]  # on under autocast, at a new rate
    state = train(parse_args([*argv, *resume]))
    return tmp, data, out, state


def test_training_checkpoints_scores_pairs_and_resumes(trained) -> None:
    _, _, out, state = trained
    assert state["epoch"] == 2 and state["pairs_seen"] == 32
    history = json.loads((out / "history.json").read_text())
    assert [h["pairs_seen"] for h in history] == [16, 32] and [h["bf16"] for h in history] == [False, True]
    assert [h["lr"] for h in history] == pytest.approx([1e-3 * 0.9, 5e-4 * 0.9])  # each after its epoch's decay
    assert all(0.0 <= h["test"]["both_right"] <= h["test"]["at_least_one_right"] <= 1.0 for h in history)
    assert torch.load(out / "best.pt", weights_only=False)["best_weights"] in ("model", "ema")


def test_a_frozen_conv1_keeps_the_mnist_filters_while_the_rest_learns(trained) -> None:
    _, _, out, _ = trained
    weights = torch.load(out / "last.pt", weights_only=False)["model"]
    start = CapsNet(CONFIG)
    init_from_mnist(start, WEIGHTS / "capsnet.onnx")
    assert torch.equal(weights["conv1.weight"], start.conv1.weight) and torch.equal(weights["conv1.bias"], start.conv1.bias)
    assert not torch.equal(weights["primary.conv.weight"], start.primary.conv.weight)
    assert [h["frozen"] for h in json.loads((out / "history.json").read_text())] == [["conv1"], ["conv1"]]


def test_export_contract_parity_and_card_entry(trained) -> None:
    import onnxruntime as ort

    from model.export_multimnist import main

    tmp, data, out, _ = trained
    weights = tmp / "weights"
    weights.mkdir()
    shutil.copy(WEIGHTS / "model-card.json", weights)
    main(["--checkpoint", str(out / "best.pt"), "--out", str(weights), "--data", str(data), "--pairs", "20", "--min-gain", "-1"])
    sess = ort.InferenceSession(str(weights / "multimnist.onnx"), providers=["CPUExecutionProvider"])
    got = sess.run(None, {"image": np.zeros((3, 1, 36, 36), np.float32)})
    assert [o.name for o in sess.get_outputs()] == ["lengths", "poses", "reconstructions"]
    assert [g.shape for g in got] == [(3, 10), (3, 10, 16), (3, 2, 1, 36, 36)]
    dec = ort.InferenceSession(str(weights / "multimnist-decoder.onnx"), providers=["CPUExecutionProvider"])
    assert dec.run(None, {"digit": np.array([1, 2]), "pose": np.zeros((2, 16), np.float32)})[0].shape == (2, 1, 36, 36)
    import onnx

    halves = {i.name: i.data_type == onnx.TensorProto.FLOAT16 for i in onnx.load(str(weights / "multimnist.onnx")).graph.initializer}
    assert halves["model.primary.conv.weight"] and halves["model.digit.W"], "the network's weights stored at half precision"
    assert not any(i.data_type == onnx.TensorProto.FLOAT16 for i in onnx.load(str(weights / "multimnist-decoder.onnx")).graph.initializer)
    card = json.loads((weights / "model-card.json").read_text())
    entry = card["multimnist"]
    assert card["name"] == "capsnet-mnist", "the MNIST entry is left as it was"
    assert entry["test"]["pairs"] == 20 and max(entry["parity_max_abs_diff"].values()) <= 1e-4
    assert set(entry["files"]) == {"multimnist.onnx", "multimnist-decoder.onnx"}
    best = torch.load(out / "best.pt", weights_only=False)
    assert entry["training"]["pairs_seen"] == best["pairs_seen"] and entry["training"]["epochs"] == best["epoch"]
    assert entry["second_digit"]["second_min_length"] > 0


def test_export_leaves_the_committed_files_unless_the_new_ones_gain_enough(trained) -> None:
    from model.export_multimnist import main

    tmp, data, out, _ = trained
    weights = tmp / "refused"
    weights.mkdir()
    shutil.copy(WEIGHTS / "model-card.json", weights)
    with pytest.raises(SystemExit, match="not written"):
        main(["--checkpoint", str(out / "best.pt"), "--out", str(weights), "--data", str(data), "--pairs", "20", "--min-gain", "1.01"])
    assert not (weights / "multimnist.onnx").exists()
    assert (weights / "model-card.json").read_bytes() == (WEIGHTS / "model-card.json").read_bytes(), "the card is left as it was"


def test_a_share_of_training_images_hold_one_digit_and_ask_for_one() -> None:
    x, y = digits(400)
    p = make_pairs(x, y, torch.arange(400), torch.Generator().manual_seed(2), single_share=0.25)
    alone = p.labels[:, 1] == -1
    assert 0.15 < alone.float().mean() < 0.35
    assert p.digits[alone, 1].sum() == 0 and torch.allclose(p.image[alone], p.digits[alone, 0])
    t = two_hot(p.labels)
    assert (t.sum(1) == torch.where(alone, 1.0, 2.0)).all()


def test_a_lone_digit_has_no_second_reconstruction_to_learn() -> None:
    from model.train_multimnist import pair_loss

    torch.manual_seed(0)
    model = CapsNet(CONFIG)
    x, y = digits(4)
    p = make_pairs(x, y, torch.arange(4), torch.Generator().manual_seed(0), single_share=1.0)
    out = forward_pairs(model, p.image, p.labels)
    _, _, r = pair_loss(out, p, CONFIG)
    first = CONFIG.reconstruction_weight * ((out["reconstructions"][:, 0] - p.digits[:, 0]) ** 2).flatten(1).sum(-1).mean()
    assert torch.allclose(r, first)


def test_a_budget_fits_the_epochs_and_anneals_to_the_final_rate() -> None:
    from model.train_multimnist import fit_schedule

    more, gamma = fit_schedule(epoch_seconds=10.0, seconds_left=95.0, lr_now=1e-3, lr_final=1e-5)
    assert more == 9 and 1e-3 * gamma ** (more - 1) == pytest.approx(1e-5)
    assert fit_schedule(10.0, 9.0, 1e-3, 1e-5) == (0, 1.0), "no time for another epoch: none"
    assert fit_schedule(10.0, 15.0, 1e-3, 1e-5) == (1, 1.0), "one more: at the rate it has"
    assert fit_schedule(10.0, 95.0, 1e-5, 2e-5) == (9, 1.0), "resumed below the final rate: held, never raised"


class SecondsPerCall:
    """Clocks for the trainer: the one budgeted moves one second each time it is read (the trainer reads it once a step,
    so a step 'takes' 1 s); the other stands still, so a run stops only if the budget reads the clock it was asked to."""

    def __init__(self, moving: str) -> None:
        self.now, self.moving = 0.0, moving

    def _read(self, name: str) -> float:
        if name == self.moving:
            self.now += 1.0
        return self.now if name == self.moving else 0.0

    def time(self) -> float:
        return self._read("wall")

    def process_time(self) -> float:
        return self._read("cpu")


@pytest.mark.parametrize("clock", ["wall", "cpu"])
def test_a_budgeted_run_stops_by_itself_at_its_final_rate(tmp_path, monkeypatch, clock) -> None:
    import model.train_multimnist as trainer

    monkeypatch.setattr(trainer, "time", SecondsPerCall(clock))
    data, out = _mnist_dir(tmp_path), tmp_path / "ckpt"
    argv = ["--data", str(data), "--out", str(out), "--batch-size", "8", "--threads", "1", "--pairs-per-epoch", "16", "--eval-pairs", "10"]
    # 2 steps an epoch; 1 min of budget on the clock named; --epochs would allow 100
    budget = ["--budget-minutes", "1", "--budget-clock", clock, "--lr-final", "1e-5", "--epochs", "100", "--ema-decay", "0"]
    state = train(parse_args([*argv, *budget]))
    history = json.loads((out / "history.json").read_text())
    assert 3 <= state["epoch"] < 100 and len(history) == state["epoch"]
    assert state["pairs_seen"] == sum(16 for _ in history), "every epoch whole: the budget was fitted, not cut into"
    rates = [1e-3] + [h["lr"] for h in history]  # the rate each epoch trained at, then the one after the last
    assert rates[-2] == pytest.approx(1e-5), "the last epoch trains at --lr-final"
    assert all(a > b for a, b in zip(rates[1:-2], rates[2:-1], strict=True)), "and the rate falls every epoch to it"
    saved = torch.load(out / "last.pt", weights_only=False)["args"]
    assert saved["budget_minutes"] == 1 and saved["lr_decay"] == pytest.approx(rates[2] / rates[1])


def test_a_packed_checkpoint_exports_and_resumes_with_a_fresh_optimiser(trained, tmp_path) -> None:
    from model.checkpoint_parts import pack, unpack
    from model.export_multimnist import main

    _, data, out, _ = trained
    best = torch.load(out / "best.pt", weights_only=False)
    pack(out / "best.pt", tmp_path / "parts")
    joined = unpack(tmp_path / "parts", tmp_path / "best.pt")
    weights = tmp_path / "weights"
    weights.mkdir()
    shutil.copy(WEIGHTS / "model-card.json", weights)
    main(["--checkpoint", str(joined), "--out", str(weights), "--data", str(data), "--pairs", "20", "--min-gain", "-1"])
    entry = json.loads((weights / "model-card.json").read_text())["multimnist"]["training"]
    assert (entry["epochs"], entry["pairs_seen"], entry["history"]) == (best["epoch"], best["pairs_seen"], best["history"])
    argv = ["--data", str(data), "--out", str(tmp_path / "go-on"), "--batch-size", "8", "--threads", "1", "--pairs-per-epoch", "16"]
    resumed = train(parse_args([*argv, "--eval-pairs", "10", "--epochs", str(best["epoch"] + 1), "--resume", str(joined)]))
    assert resumed["epoch"] == best["epoch"] + 1 and resumed["pairs_seen"] == best["pairs_seen"] + 16
    history = json.loads((tmp_path / "go-on" / "history.json").read_text())
    assert history[-1]["lr"] == pytest.approx(best["history"][-1]["lr"] * 0.9), "from the rate the packed run ended at"


def test_pairs_and_a_training_step_make_every_tensor_where_the_data_is() -> None:
    """What a GPU run needs (batches made on the GPU, nothing copied back and forth), checked without one: with the
    default device set to 'meta', a tensor made without a device lands there and the step fails on the mix."""
    from model.train import WeightAverage, optimise
    from model.train_multimnist import evaluate_pairs, pair_loss

    x, y = digits(40)
    model = CapsNet(CONFIG)
    opt, ema = torch.optim.Adam(model.parameters()), WeightAverage(model, 0.99)
    evaluation, gen = fixed_test_pairs(x, y, 8), torch.Generator(device="cpu").manual_seed(0)
    torch.set_default_device("meta")
    try:
        batch = make_training_pairs(x, y, torch.randint(0, 40, (8,), generator=gen, device="cpu"), gen, 0.25, served_share=0.5)
        optimise(pair_loss(forward_pairs(model, batch.image, batch.labels), batch, CONFIG)[0], opt, ema)
        score = evaluate_pairs(model, evaluation)
    finally:
        torch.set_default_device(None)
    assert batch.image.device.type == "cpu" and 0.0 <= score["both_right"] <= 1.0


@pytest.fixture(scope="module")
def exported(trained, tmp_path_factory):
    """The tiny run's best weights exported as the committed ones are: weights/ with its card entry."""
    from model.export_multimnist import main

    _, data, out, _ = trained
    weights = tmp_path_factory.mktemp("exported") / "weights"
    weights.mkdir()
    shutil.copy(WEIGHTS / "model-card.json", weights)
    main(["--checkpoint", str(out / "best.pt"), "--out", str(weights), "--data", str(data), "--pairs", "20", "--min-gain", "-1"])
    return data, weights


def _scores_before_and_after_resuming(onnx_path, pairs, tmp_path) -> tuple[dict, dict]:
    """The export's scores, and those of the network resumed from it and exported again; the two files' capsule lengths
    are the same too (a score on a few pairs of a barely trained network could agree by chance)."""
    from model.export_multimnist import export, run_onnx, score
    from model.train_multimnist import resume_from_export

    model = CapsNet(CONFIG)
    resume_from_export(model, onnx_path)
    again, _ = export(model.eval(), tmp_path)
    images, digits_, labels = pairs.image.numpy(), pairs.digits.numpy(), pairs.labels.numpy()
    before, after = run_onnx(onnx_path, images), run_onnx(again, images)
    np.testing.assert_allclose(after["lengths"], before["lengths"], atol=1e-5)
    return score(before, digits_, labels), score(after, digits_, labels)


def test_a_run_resumed_from_the_export_scores_what_the_export_scores(exported, tmp_path) -> None:
    """The committed file is the training state: read back into the network, before any step, it is the same network."""
    from model.data import load_tensors

    data, weights = exported
    _, _, x, y = load_tensors(data, limit=1)
    before, after = _scores_before_and_after_resuming(weights / "multimnist.onnx", fixed_test_pairs(x, y, 20), tmp_path)
    assert before == after


def test_the_committed_export_resumes_as_it_scores(tmp_path) -> None:
    from model.data import load_tensors
    from tests.needs import need_mnist

    _, _, x, y = load_tensors(need_mnist(), limit=1)
    before, after = _scores_before_and_after_resuming(WEIGHTS / "multimnist.onnx", fixed_test_pairs(x, y, 500), tmp_path)
    card = json.loads((WEIGHTS / "model-card.json").read_text())["multimnist"]["test"]["both_right"]
    assert before == after and before["both_right"] * 500 >= fewest(card, 500)


def test_training_resumed_from_an_export_adds_to_its_record(exported, tmp_path) -> None:
    """Epochs, pairs and history go on from the card's entry; Adam starts afresh at the rate the card recorded."""
    data, weights = exported
    entry = json.loads((weights / "model-card.json").read_text())["multimnist"]["training"]
    argv = ["--data", str(data), "--out", str(tmp_path / "go-on"), "--batch-size", "8", "--threads", "1", "--pairs-per-epoch", "16"]
    argv += ["--eval-pairs", "10", "--epochs", str(entry["epochs"] + 1), "--resume", str(weights / "multimnist.onnx")]
    state = train(parse_args(argv))
    assert state["epoch"] == entry["epochs"] + 1 and state["pairs_seen"] == entry["pairs_seen"] + 16
    assert state["history"][:-1] == entry["history"]
    assert state["history"][-1]["lr"] == pytest.approx(entry["lr_next"] * 0.9)
    assert state["train_seconds"] > entry["train_seconds"]
