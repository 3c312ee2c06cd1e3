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


def test_the_device_script_trains_to_its_budget_and_packs_what_comes_back(tmp_path) -> None:
    out = tmp_path / "OUT"
    env = {**os.environ, "OUT": str(out), "DEVICE": "cpu", "PYTHON": sys.executable, "MINUTES": "0.15", "RUN": str(tmp_path / "run")}
    env["DATA"] = str(_mnist_dir(tmp_path))
    tiny = ["--pairs-per-epoch", "16", "--batch-size", "8", "--eval-pairs", "10", "--threads", "1"]
    done = subprocess.run(["bash", str(SCRIPT), *tiny], env=env, capture_output=True, text=True, timeout=300)
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
