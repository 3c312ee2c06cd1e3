"""A file whose weights are stored at half precision: half the bytes, the answers of its rounded weights, no cost at
inference."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from model.onnx_weights import HALF_MIN_ELEMENTS, store_half


def _dense_file(path: Path, w: np.ndarray, b: np.ndarray) -> None:
    """x [N,64] -> sigmoid(x W^T + b) [N,32], W and b as initialisers, as an exported layer holds them."""
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "W", "b"], ["h"], transB=1), helper.make_node("Sigmoid", ["h"], ["y"])],
        "dense",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 32])],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "b")],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9), str(path))


def _run(path: Path, x: np.ndarray, optimized: Path | None = None) -> np.ndarray:
    opts = ort.SessionOptions()
    if optimized is not None:
        opts.optimized_model_filepath = str(optimized)
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


@pytest.fixture
def weights() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.normal(0, 0.1, (32, 64)).astype(np.float32), rng.normal(0, 0.1, 32).astype(np.float32)


def test_a_file_stored_at_half_precision_answers_as_its_rounded_weights_do(tmp_path, weights) -> None:
    w, b = weights
    path = tmp_path / "dense.onnx"
    _dense_file(path, w, b)
    full = path.stat().st_size
    assert store_half(path) == 1, "the weight matrix, not the bias (under HALF_MIN_ELEMENTS)"
    assert w.size >= HALF_MIN_ELEMENTS > b.size
    assert path.stat().st_size < 0.55 * full

    stored = {i.name: numpy_helper.to_array(i) for i in onnx.load(str(path)).graph.initializer}
    assert stored["W"].dtype == np.float16 and stored["b"].dtype == np.float32, "the initialisers keep their names"
    x = np.random.default_rng(1).random((5, 64), np.float32)
    got = _run(path, x)
    assert got.dtype == np.float32
    rounded = 1 / (1 + np.exp(-(x @ w.astype(np.float16).astype(np.float32).T + b)))
    np.testing.assert_allclose(got, rounded, atol=1e-6)
    assert np.abs(got - 1 / (1 + np.exp(-(x @ w.T + b)))).max() < 1e-3, "and nearly the float32 weights' answers"


def test_onnxruntime_folds_the_casts_away_as_it_loads_the_file(tmp_path, weights) -> None:
    """What runs is the float32 graph: the half-precision weights cost nothing once the file is loaded."""
    path = tmp_path / "dense.onnx"
    _dense_file(path, *weights)
    store_half(path)
    assert "Cast" in {n.op_type for n in onnx.load(str(path)).graph.node}
    _run(path, np.zeros((1, 64), np.float32), optimized=tmp_path / "loaded.onnx")
    assert "Cast" not in {n.op_type for n in onnx.load(str(tmp_path / "loaded.onnx")).graph.node}
