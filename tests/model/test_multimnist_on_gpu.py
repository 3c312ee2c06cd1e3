"""model/multimnist_on_gpu.sh, run as a GPU machine would run it but on the CPU: it trains for its budget, and what it
leaves in $OUT fits what such a machine returns (8 files, 16 MiB each, two folders down) and joins into a checkpoint
of the network."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import torch

from model.capsnet import CapsNet
from model.checkpoint_parts import unpack
from model.multimnist import CONFIG
from model.train import checkpoint_weights
from tests.model.test_multimnist import _mnist_dir

SCRIPT = Path(__file__).parents[2] / "model" / "multimnist_on_gpu.sh"


TINY = ["--pairs-per-epoch", "16", "--batch-size", "8", "--eval-pairs", "10", "--threads", "1"]


def _run(tmp_path: Path, **env_extra: str) -> subprocess.CompletedProcess:
    """The script as a GPU machine runs it, on the CPU, for a few seconds of tiny epochs."""
    env = {**os.environ, "OUT": str(tmp_path / "OUT"), "DEVICE": "cpu", "PYTHON": sys.executable, "MINUTES": "0.15"}
    env.update(RUN=str(tmp_path / "run"), DATA=str(_mnist_dir(tmp_path)), **env_extra)
    return subprocess.run(["bash", str(SCRIPT), *TINY], env=env, capture_output=True, text=True, timeout=300)


def test_the_device_script_trains_to_its_budget_and_packs_what_comes_back(tmp_path) -> None:
    out = tmp_path / "OUT"
    done = _run(tmp_path)
    assert done.returncode == 0, done.stderr + (out / "train.log").read_text()
    files = [p for p in out.rglob("*") if p.is_file()]
    assert len(files) <= 8 and all(p.stat().st_size <= 16 * 2**20 for p in files)
    assert all(len(p.relative_to(out).parts) <= 3 for p in files), "no deeper than $OUT/a/b/file"
    log = (out / "train.log").read_text()
    assert "budget:" in log and "more epochs fit" in log, log
    history = json.loads((out / "history.json").read_text())
    ckpt = torch.load(unpack(out / "best", tmp_path / "best.pt"), weights_only=False)
    assert ckpt["epoch"] <= len(history) and ckpt["args"]["budget_minutes"] == 0.15
    CapsNet(CONFIG).load_state_dict(checkpoint_weights(ckpt))

    assert "resumed the export weights/multimnist.onnx" in log, "the committed weights are the training state"
    card = json.loads((SCRIPT.parents[1] / "weights" / "model-card.json").read_text())
    assert ckpt["started_from"] == card["multimnist"]["training"]["started_from"], "a resume keeps where the first epoch began"


def test_the_device_script_starts_from_random_weights_when_told(tmp_path) -> None:
    """START=scratch: the paper's own start, whatever weights are committed."""
    done = _run(tmp_path, START="scratch")
    log = (tmp_path / "OUT" / "train.log").read_text()
    assert done.returncode == 0, done.stderr + log
    assert "started from random weights" in log and "resumed" not in log, log
    ckpt = torch.load(unpack(tmp_path / "OUT" / "best", tmp_path / "best.pt"), weights_only=False)
    assert ckpt["started_from"] == "random weights" and ckpt["epoch"] >= 1  # what the card will say, once exported


def test_the_device_script_refuses_an_unknown_start(tmp_path) -> None:
    done = _run(tmp_path, START="fresh")
    assert done.returncode == 2 and "START is committed, mnist or scratch, not 'fresh'" in done.stderr
