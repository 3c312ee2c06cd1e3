"""The service takes its constants and its choice of model file from the model card."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.engine.card import Int8, WeightsError, choose_model_file, choose_precision, load_card
from service.settings import Settings
from tests.conftest import WEIGHTS

CARD = json.loads((WEIGHTS / "model-card.json").read_text())


def test_constants_come_from_the_card():
    card = load_card(WEIGHTS)
    a = CARD["architecture"]
    assert (card.image_size, card.num_classes, card.digit_dim, card.num_primary) == (
        a["image_size"],
        a["num_classes"],
        a["digit_dim"],
        a["num_primary_capsules"],
    )


def test_precision_choice():
    card = load_card(WEIGHTS)
    fp32_only = card.model_copy(update={"int8": None})
    assert choose_model_file(fp32_only, "auto") == choose_model_file(fp32_only, "fp32") == "capsnet.onnx"
    with pytest.raises(WeightsError, match="no INT8 model"):
        choose_model_file(fp32_only, "int8")
    good = load_card(WEIGHTS).model_copy(update={"int8": Int8(file="capsnet-int8.onnx", meets_bars=True)})
    bad = card.model_copy(update={"int8": Int8(file="capsnet-int8.onnx", meets_bars=False)})
    assert choose_model_file(good, "auto") == "capsnet-int8.onnx"
    assert choose_model_file(bad, "auto") == "capsnet.onnx"
    assert choose_model_file(bad, "int8") == "capsnet-int8.onnx"
    assert choose_model_file(good, "fp32") == "capsnet.onnx"


def test_auto_serves_int8_on_the_cpu_only():
    """INT8 QDQ convolutions under the CUDA provider run as dequantise + FP32, slower than the FP32 file: auto means FP32 there."""
    good = load_card(WEIGHTS).model_copy(update={"int8": Int8(file="capsnet-int8.onnx", meets_bars=True)})
    assert choose_precision(good, "auto", "CPU") == "int8"
    assert choose_precision(good, "auto", "GPU") == "fp32"
    assert choose_model_file(good, "auto", "GPU") == "capsnet.onnx"
    assert choose_precision(good, "int8", "GPU") == "int8"  # pinned: served as asked, wherever
    with pytest.raises(ValueError, match="unknown precision"):
        choose_precision(good, "fp16", "CPU")


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_both_precisions_serve(precision):
    with TestClient(create_app(Settings(precision=precision, intra_op_threads=1, warmup_runs=0))) as c:
        assert c.get("/model").json()["precision"] == precision
        body = c.post("/predict", json={"pixels": [[0.0] * 28] * 28}).json()
        assert body["model"]["precision"] == precision and len(body["lengths"]) == 10


def test_a_card_without_what_the_service_needs_is_refused_by_name(tmp_path):
    """Validated once, at load: a missing or mistyped field stops start-up and says which, not a KeyError mid-request."""
    broken = json.loads(json.dumps(CARD))
    del broken["is_digit"]
    broken["architecture"]["image_size"] = "twenty-eight"
    (tmp_path / "model-card.json").write_text(json.dumps(broken))
    with pytest.raises(WeightsError) as e:
        load_card(tmp_path)
    assert "architecture.image_size" in str(e.value) and "is_digit" in str(e.value) and "model.calibrate" in str(e.value)
    # and what it does not read is kept as written, for GET /model
    assert load_card(WEIGHTS).model_dump(mode="json")["training"] == CARD["training"]
