"""model/decoder_layout.py: the offsets the page's decoder reads each layer at hold that layer's values."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from model.decoder_layout import LAYERS, tensors
from tests.conftest import WEIGHTS


@pytest.mark.parametrize("name, entry", [("decoder.onnx", "decoder"), ("multimnist-decoder.onnx", "multimnist")])
def test_each_layer_is_read_from_the_file_at_the_cards_offset(name: str, entry: str) -> None:
    card = json.loads((WEIGHTS / "model-card.json").read_text())
    spec = card["decoder"] if entry == "decoder" else card["multimnist"]["decoder"]
    path = WEIGHTS / name
    assert spec["tensors"] == tensors(path), "the card's offsets are not the file's: run `python -m model.decoder_layout`"
    data = path.read_bytes()
    inits = {i.name: numpy_helper.to_array(i) for i in onnx.load(str(path)).graph.initializer}
    for layer in LAYERS:
        t = spec["tensors"][layer]
        n = int(np.prod(t["shape"]))
        values = np.frombuffer(data, dtype="<f4", count=n, offset=t["offset"]).reshape(t["shape"])
        np.testing.assert_array_equal(values, inits[layer])


def test_a_file_without_the_decoder_layers_is_refused(tmp_path) -> None:
    other = tmp_path / "routing.onnx"
    other.write_bytes((WEIGHTS / "routing.onnx").read_bytes())
    with pytest.raises(ValueError, match="decoder.net.0.weight"):
        tensors(other)
