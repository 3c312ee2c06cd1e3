"""Training writes a checkpoint each epoch and resumes from a checkpoint or from exported ONNX weights."""
from __future__ import annotations

import json

import torch

from model.capsnet import CapsNet
from model.export import build_card, export_onnx
from model.train import parse_args, train
from tests.model.test_data import make_split


def _args(data, out, epochs, resume=None):
    argv = ["--data", str(data), "--out", str(out), "--epochs", str(epochs), "--batch-size", "16", "--threads", "1"]
    return parse_args(argv + (["--resume", str(resume)] if resume else []))


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
