"""model/baseline.py: the comparison CNN trains, exports to ONNX and records what it is."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import onnxruntime as ort

from model.baseline import ONNX_NAME, main

ROOT = Path(__file__).resolve().parents[2]


def test_a_short_run_exports_a_working_onnx_and_its_record(tmp_path):
    shutil.copy(ROOT / "weights" / "model-card.json", tmp_path / "model-card.json")
    main(["--weights", str(tmp_path), "--out", str(tmp_path / "ck"), "--epochs", "1", "--limit", "1000", "--threads", "1"])
    record = json.loads((tmp_path / "baseline-cnn.json").read_text())
    assert record["epochs"] == 1 and record["file"] == ONNX_NAME and record["parameters"] == 1_199_882
    assert 0.5 < record["test_accuracy"] <= 1.0  # 1000 images, one epoch: well above chance
    logits = ort.InferenceSession(str(tmp_path / ONNX_NAME)).run(["logits"], {"image": np.zeros((3, 1, 28, 28), np.float32)})[0]
    assert logits.shape == (3, 10)


def test_the_committed_baseline_is_a_comparable_mnist_classifier():
    record = json.loads((ROOT / "weights" / "baseline-cnn.json").read_text())
    card = json.loads((ROOT / "weights" / "model-card.json").read_text())
    assert record["epochs"] == card["training"]["epochs"]
    assert record["test_accuracy"] >= 0.99 and "shift 2 px" in record["recipe"]
