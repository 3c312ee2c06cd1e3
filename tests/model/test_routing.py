"""model/routing.py: the trace is the trained routing, step by step, and the command is safe to run again."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import onnx
import torch

from model.capsnet import CapsNet
from model.routing import RoutingTrace, add_primary_output, run

ROOT = Path(__file__).resolve().parents[2]


def test_the_trace_holds_the_forward_pass_at_the_trained_iteration():
    torch.manual_seed(0)
    model = CapsNet().eval()
    x = torch.rand(3, 1, 28, 28) ** 3
    with torch.no_grad():
        out = model(x)
        lengths, coupling, agreement = RoutingTrace(model.digit, 6)(out["primary"])
    assert lengths.shape == (3, 6, 10) and coupling.shape == agreement.shape == (3, 6, 10, 1152)
    torch.testing.assert_close(lengths[:, 2], out["lengths"])
    torch.testing.assert_close(coupling[:, 2].transpose(1, 2), out["coupling"])
    torch.testing.assert_close(coupling[:, 0], torch.full_like(coupling[:, 0], 0.1))
    # b after iteration r is the sum of the agreements so far: softmax of it is the next coupling
    torch.testing.assert_close(coupling[:, 3], torch.softmax(agreement[:, :3].sum(1), dim=1), atol=1e-5, rtol=1e-5)


def test_the_command_adds_primary_once_and_records_the_trace(tmp_path):
    for name in ("capsnet.onnx", "capsnet-int8.onnx", "decoder.onnx", "model-card.json"):
        shutil.copy(ROOT / "weights" / name, tmp_path / name)
    assert not add_primary_output(tmp_path / "capsnet.onnx")  # the committed graphs have it already
    section = run(tmp_path, iterations=5)
    card = json.loads((tmp_path / "model-card.json").read_text())
    assert section == card["routing"] and section["iterations"] == 5 and section["trained"] == 3
    assert max(section["parity_max_abs_diff_at_trained"].values()) <= 1e-5
    assert card["files"]["routing.onnx"]["bytes"] == (tmp_path / "routing.onnx").stat().st_size
    outputs = [o.name for o in onnx.load(str(tmp_path / "capsnet-int8.onnx"), load_external_data=False).graph.output]
    assert outputs[-1] == "primary" and outputs.count("primary") == 1
    assert card["files"]["capsnet.onnx"] == json.loads((ROOT / "weights" / "model-card.json").read_text())["files"]["capsnet.onnx"]


def test_a_graph_without_primary_gets_it_with_the_same_answers(tmp_path):
    """The surgery on an older graph: `primary` becomes an output, every other output stays bit for bit."""
    import onnxruntime as ort

    path = tmp_path / "old.onnx"
    m = onnx.load(str(ROOT / "weights" / "capsnet.onnx"))
    keep = [o for o in m.graph.output if o.name != "primary"]
    del m.graph.output[:]
    m.graph.output.extend(keep)
    m.graph.node.remove(next(n for n in m.graph.node if "primary" in n.output))
    onnx.save(m, str(path))
    x = np.random.default_rng(0).random((2, 1, 28, 28), dtype=np.float32)
    before = ort.InferenceSession(str(path)).run(["lengths", "coupling"], {"image": x})
    assert add_primary_output(path)
    after = ort.InferenceSession(str(path)).run(["lengths", "coupling", "primary"], {"image": x})
    np.testing.assert_array_equal(before[0], after[0])
    np.testing.assert_array_equal(before[1], after[1])
    assert after[2].shape == (2, 1152, 8)
