"""Export writes ONNX files that compute what PyTorch computes, and the weights come back out of them."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from model.capsnet import CapsNet
from model.export import build_card, check_parity, export_onnx
from model.onnx_weights import load_onnx_into


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    torch.manual_seed(3)
    model = CapsNet().eval()
    out = tmp_path_factory.mktemp("weights")
    capsnet_path, decoder_path = export_onnx(model, out)
    return model, capsnet_path, decoder_path


def test_parity_with_pytorch_at_batch_1_and_7(exported):
    model, capsnet_path, decoder_path = exported
    worst = check_parity(model, capsnet_path, decoder_path, batches=(1, 7))
    assert set(worst) == {"lengths", "poses", "reconstruction", "coupling", "primary", "decoder"}
    assert max(worst.values()) <= 1e-4


def test_io_names_shapes_and_dynamic_batch(exported):
    _, capsnet_path, decoder_path = exported
    sess = ort.InferenceSession(str(capsnet_path), providers=["CPUExecutionProvider"])
    assert [i.name for i in sess.get_inputs()] == ["image"]
    assert [o.name for o in sess.get_outputs()] == ["lengths", "poses", "reconstruction", "coupling", "primary"]
    for n in (1, 3):
        lengths, poses, recon, coupling, primary = sess.run(None, {"image": np.random.rand(n, 1, 28, 28).astype(np.float32)})
        assert lengths.shape == (n, 10) and poses.shape == (n, 10, 16)
        assert recon.shape == (n, 1, 28, 28) and coupling.shape == (n, 1152, 10) and primary.shape == (n, 1152, 8)
        assert (np.linalg.norm(primary, axis=-1) < 1.0).all()  # squashed
        assert np.allclose(coupling.sum(-1), 1.0, atol=1e-5)
    dsess = ort.InferenceSession(str(decoder_path), providers=["CPUExecutionProvider"])
    assert [i.name for i in dsess.get_inputs()] == ["digit", "pose"]
    assert dsess.get_inputs()[0].type == "tensor(int64)"


def test_decoder_onnx_redraws_what_the_full_model_reconstructs(exported):
    _, capsnet_path, decoder_path = exported
    sess = ort.InferenceSession(str(capsnet_path), providers=["CPUExecutionProvider"])
    dsess = ort.InferenceSession(str(decoder_path), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).random((5, 1, 28, 28), dtype=np.float32)
    lengths, poses, recon = sess.run(["lengths", "poses", "reconstruction"], {"image": x})
    digit = lengths.argmax(-1).astype(np.int64)
    again = dsess.run(None, {"digit": digit, "pose": poses[np.arange(5), digit]})[0]
    assert np.abs(again - recon).max() <= 1e-5


def test_weights_load_back_from_onnx(exported):
    model, capsnet_path, _ = exported
    fresh = CapsNet()
    load_onnx_into(fresh, capsnet_path)
    for k, v in model.state_dict().items():
        assert torch.equal(v, fresh.state_dict()[k]), k


def test_opset_and_card(exported):
    model, capsnet_path, decoder_path = exported
    assert max(o.version for o in onnx.load(str(capsnet_path)).opset_import if o.domain in ("", "ai.onnx")) == 18
    card = build_card(model, {"epoch": 0, "history": []}, capsnet_path, decoder_path, {"lengths": 0.0}, None)
    json.dumps(card)  # serialisable
    assert card["parameters"] == {"total": 8_215_568, "without_decoder": 6_804_224}
    assert card["architecture"]["routing_iterations"] == 3
    assert card["architecture"]["num_primary_capsules"] == 1152
    assert len(card["files"]["capsnet.onnx"]["sha256"]) == 64
    assert card["deviations_from_paper"]


def test_int8_model_runs_and_stays_close_to_fp32(exported, tmp_path):
    from model.quantize import quantize

    _, capsnet_path, _ = exported
    rng = np.random.default_rng(0)
    calib = (rng.random((64, 28, 28)) < 0.2).astype(np.uint8) * 255
    int8 = tmp_path / "capsnet-int8.onnx"
    quantize(capsnet_path, int8, calib)
    ops = {n.op_type for n in onnx.load(str(int8)).graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= ops
    x = (rng.random((4, 1, 28, 28)) < 0.2).astype(np.float32)
    ref = ort.InferenceSession(str(capsnet_path), providers=["CPUExecutionProvider"]).run(None, {"image": x})
    got = ort.InferenceSession(str(int8), providers=["CPUExecutionProvider"]).run(None, {"image": x})
    assert [g.shape for g in got] == [r.shape for r in ref]
    assert np.abs(got[0] - ref[0]).max() < 0.05  # capsule lengths


def test_int8_decoder_redraws_close_to_fp32_and_each_pose_alike_in_any_batch(exported, tmp_path):
    """The counterfactual redraws' decoder: its three layers quantised, its pictures within a few grey levels of
    decoder.onnx's, and a pose's picture the same alone or batched with others (fixed ranges: an answer does not
    depend on the requests that shared its batch)."""
    from model.quantize import quantize_decoder

    _, _, decoder_path = exported
    int8 = tmp_path / "decoder-int8.onnx"
    rng = np.random.default_rng(1)
    quantize_decoder(decoder_path, int8, rng.normal(0, 0.3, (640, 10, 16)).astype(np.float32))
    ops = [n.op_type for n in onnx.load(str(int8)).graph.node]
    assert ops.count("Gemm") == 3 and ops.count("DequantizeLinear") >= 6  # activations and weights of each layer
    feed = {"digit": rng.integers(0, 10, 40).astype(np.int64), "pose": rng.normal(0, 0.3, (40, 16)).astype(np.float32)}
    ref = ort.InferenceSession(str(decoder_path), providers=["CPUExecutionProvider"]).run(None, feed)[0]
    session = ort.InferenceSession(str(int8), providers=["CPUExecutionProvider"])
    got = session.run(None, feed)[0]
    assert got.shape == ref.shape == (40, 1, 28, 28)
    assert np.abs(got - ref).max() < 0.15 and np.abs(got - ref).mean() < 0.01
    alone = session.run(None, {"digit": feed["digit"][:3], "pose": feed["pose"][:3]})[0]
    np.testing.assert_array_equal(alone, got[:3])


def test_exported_squash_is_safe_at_zero(tmp_path):
    """With PrimaryCaps silenced every capsule is exactly zero: the ONNX model must still give numbers, not NaN."""
    torch.manual_seed(0)
    model = CapsNet().eval()
    with torch.no_grad():
        model.primary.conv.weight.zero_()
        model.primary.conv.bias.zero_()
    capsnet_path, _ = export_onnx(model, tmp_path)
    sess = ort.InferenceSession(str(capsnet_path), providers=["CPUExecutionProvider"])
    lengths, poses, recon, coupling, _ = sess.run(None, {"image": np.random.default_rng(0).random((2, 1, 28, 28), dtype=np.float32)})
    for out in (lengths, poses, recon, coupling):
        assert np.isfinite(out).all()
    assert np.abs(lengths).max() == 0.0 and np.allclose(coupling, 0.1)
