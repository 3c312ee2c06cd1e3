"""The service takes its constants and its choice of model file from the model card."""
from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.card import ModelCard, WeightsError, choose_model_file, choose_precision, load_card
from service.settings import Settings
from tests.conftest import WEIGHTS

CARD = json.loads((WEIGHTS / "model-card.json").read_text())


def test_constants_come_from_the_card():
    card = load_card(WEIGHTS)
    a = CARD["architecture"]
    assert (card.image_size, card.num_classes, card.digit_dim, card.num_primary) == (a["image_size"], a["num_classes"], a["digit_dim"], a["num_primary_capsules"])


def test_precision_choice():
    fp32_only = ModelCard({"files": {}})
    assert choose_model_file(fp32_only, "auto") == choose_model_file(fp32_only, "fp32") == "capsnet.onnx"
    with pytest.raises(WeightsError, match="no INT8 model"):
        choose_model_file(fp32_only, "int8")
    good = ModelCard({"int8": {"file": "capsnet-int8.onnx", "meets_bars": True}})
    bad = ModelCard({"int8": {"file": "capsnet-int8.onnx", "meets_bars": False}})
    assert choose_model_file(good, "auto") == "capsnet-int8.onnx"
    assert choose_model_file(bad, "auto") == "capsnet.onnx"
    assert choose_model_file(bad, "int8") == "capsnet-int8.onnx"
    assert choose_model_file(good, "fp32") == "capsnet.onnx"


def test_auto_serves_int8_on_the_cpu_only():
    """INT8 QDQ convolutions under the CUDA provider run as dequantise + FP32, slower than the FP32 file: auto means FP32 there."""
    good = ModelCard({"int8": {"file": "capsnet-int8.onnx", "meets_bars": True}})
    assert choose_precision(good, "auto", "CPU") == "int8"
    assert choose_precision(good, "auto", "GPU") == "fp32"
    assert choose_model_file(good, "auto", "GPU") == "capsnet.onnx"
    assert choose_precision(good, "int8", "GPU") == "int8"  # pinned: served as asked, wherever
    with pytest.raises(ValueError, match="unknown precision"):
        choose_precision(good, "fp16", "CPU")


@pytest.mark.skipif("int8" not in CARD, reason="the committed model card lists no INT8 model")
@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_both_precisions_serve(precision):
    with TestClient(create_app(Settings(precision=precision, intra_op_threads=1, warmup_runs=0))) as c:
        assert c.get("/model").json()["precision"] == precision
        body = c.post("/predict", json={"pixels": [[0.0] * 28] * 28}).json()
        assert body["model"]["precision"] == precision and len(body["lengths"]) == 10
