"""Training writes a checkpoint each epoch and resumes from a checkpoint or from exported ONNX weights."""

from __future__ import annotations

import json

import pytest
import torch

from model.capsnet import CapsNet
from model.export import build_card, export_onnx
from model.train import WeightAverage, checkpoint_weights, parse_args, train
from tests.model.test_data import make_split


def _args(data, out, epochs, resume=None):
    argv = ["--data", str(data), "--out", str(out), "--epochs", str(epochs), "--batch-size", "16", "--threads", "1"]
    return parse_args(argv + (["--resume", str(resume)] if resume else []))


def _record(epoch: dict) -> dict:
    """An epoch's history record as history.json and the card hold it (timings to the millisecond tell two runs apart)."""
    return json.loads(json.dumps(epoch))


def _data(tmp_path, n_train: int):
    """A tiny MNIST-shaped directory: train split gzipped, test split raw (the reader takes both)."""
    data = tmp_path / "data"
    data.mkdir()
    make_split(data, "train", n_train, gz=True)
    make_split(data, "test", 16, gz=False)
    return data


def test_epochs_checkpoint_and_resume(tmp_path):
    data = _data(tmp_path, 32)
    out = tmp_path / "ckpt"
    state = train(_args(data, out, 1))
    assert state["epoch"] == 1 and (out / "last.pt").exists() and (out / "best.pt").exists()
    history = json.loads((out / "history.json").read_text())
    assert len(history) == 1 and 0.0 <= history[0]["test_accuracy"] <= 1.0

    state = train(_args(data, out, 2, resume=out / "last.pt"))
    assert state["epoch"] == 2 and len(state["history"]) == 2
    assert _record(state["history"][0]) == history[0]  # the first epoch was carried over, not trained again
    ckpt = torch.load(out / "last.pt", weights_only=False)
    assert ckpt["epoch"] == 2
    assert abs(ckpt["optimizer"]["param_groups"][0]["lr"] - 1e-3 * 0.9**2) < 1e-9


def test_resume_from_exported_onnx_keeps_the_epoch_count(tmp_path):
    data = _data(tmp_path, 16)
    out = tmp_path / "ckpt"
    train(_args(data, out, 1))
    ckpt = torch.load(out / "last.pt", weights_only=False)

    model = CapsNet()
    model.load_state_dict(ckpt["model"])
    weights = tmp_path / "weights"
    paths = export_onnx(model.eval(), weights)
    (weights / "model-card.json").write_text(json.dumps(build_card(model, ckpt, *paths, {}, None)))
    state = train(_args(data, tmp_path / "ckpt2", 2, resume=weights / "capsnet.onnx"))
    assert state["epoch"] == 2 and len(state["history"]) == 2
    assert _record(state["history"][0]) == _record(ckpt["history"][0])  # from the card, not trained again


def test_weight_average_is_checkpointed_and_the_better_weights_are_marked(tmp_path, monkeypatch):
    data = _data(tmp_path, 32)
    out = tmp_path / "ckpt"
    train(
        parse_args(["--data", str(data), "--out", str(out), "--epochs", "1", "--batch-size", "8", "--threads", "1", "--ema-decay", "0.5"])
    )
    ckpt = torch.load(out / "best.pt", weights_only=False)
    rec = ckpt["history"][0]
    assert 0.0 <= rec["ema_test_accuracy"] <= 1.0
    # four steps of averaging at decay 0.5 leave the average behind the trained weights
    assert not torch.equal(ckpt["ema"]["conv1.weight"], ckpt["model"]["conv1.weight"])
    assert ckpt["best_weights"] == ("ema" if rec["ema_test_accuracy"] > rec["test_accuracy"] else "model")
    assert ckpt["best_acc"] == max(rec["ema_test_accuracy"], rec["test_accuracy"])
    assert checkpoint_weights(ckpt) is ckpt[ckpt["best_weights"]]

    # a checkpoint holding an average resumes with it: with the averaging stopped, the next checkpoint's average is the
    # one it was given, not the resumed weights' copy a fresh average starts from
    monkeypatch.setattr(WeightAverage, "update", lambda self: None)
    given = torch.load(out / "last.pt", weights_only=False)["ema"]["conv1.weight"]
    state = train(
        parse_args(
            [
                "--data",
                str(data),
                "--out",
                str(out),
                "--epochs",
                "2",
                "--batch-size",
                "8",
                "--threads",
                "1",
                "--ema-decay",
                "0.5",
                "--resume",
                str(out / "last.pt"),
            ]
        )
    )
    assert state["epoch"] == 2 and "ema" not in state
    resumed = torch.load(out / "last.pt", weights_only=False)
    assert torch.equal(resumed["ema"]["conv1.weight"], given) and not torch.equal(given, resumed["model"]["conv1.weight"])


def test_device_is_cuda_when_torch_sees_a_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert parse_args([]).device == "cuda"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert parse_args([]).device == "cpu"
    assert parse_args(["--device", "cuda:1"]).device == "cuda:1"


def test_training_puts_the_model_and_its_average_on_the_device_asked_for(tmp_path):
    data = _data(tmp_path, 16)
    args = parse_args(
        ["--data", str(data), "--out", str(tmp_path / "ckpt"), "--epochs", "1", "--batch-size", "8", "--threads", "1", "--device", "cpu"]
    )
    train(args)
    ckpt = torch.load(tmp_path / "ckpt" / "last.pt", weights_only=False)
    assert ckpt["args"]["device"] == "cpu"
    assert {t.device.type for t in [*ckpt["model"].values(), *ckpt["ema"].values()]} == {"cpu"}


def test_a_device_this_machine_lacks_is_refused_not_trained_around(tmp_path):
    """`--device` is honoured, not ignored: a device there is none of (the hundredth GPU, on any machine) stops the run
    before a checkpoint is written, where a run that ignored it would train on the CPU and save one."""
    data = _data(tmp_path, 16)
    out = tmp_path / "ckpt"
    args = parse_args(["--data", str(data), "--out", str(out), "--epochs", "1", "--batch-size", "8", "--device", "cuda:99"])
    with pytest.raises((AssertionError, RuntimeError), match="(?i)cuda|device"):
        train(args)
    assert not (out / "last.pt").exists()
