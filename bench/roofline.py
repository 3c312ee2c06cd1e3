"""The machine's fp32 GEMM rate: the ceiling for a network whose time is almost all convolution."""

from __future__ import annotations

import numpy as np

from model.machine import timed


def _rate(run, flops: float, min_seconds: float) -> float:
    return flops * timed(run, min_seconds, warmup=1, min_calls=3)[1] / 1e9


def numpy_gemm(n: int = 1024, min_seconds: float = 2.0) -> float:
    rng = np.random.default_rng(0)
    a, b = rng.random((n, n), np.float32), rng.random((n, n), np.float32)
    return _rate(lambda: a @ b, 2.0 * n**3, min_seconds)


def onnxruntime_gemm(n: int = 1024, min_seconds: float = 2.0, threads: int = 0) -> float:
    """MLAS, the GEMM onnxruntime's own convolutions run on."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    b = numpy_helper.from_array(rng.random((n, n), np.float32), "B")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["A", "B"], ["C"])],
        "gemm",
        [helper.make_tensor_value_info("A", TensorProto.FLOAT, [n, n])],
        [helper.make_tensor_value_info("C", TensorProto.FLOAT, [n, n])],
        [b],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    a = rng.random((n, n), np.float32)
    return _rate(lambda: sess.run(None, {"A": a}), 2.0 * n**3, min_seconds)


def measure(min_seconds: float = 2.0) -> dict:
    r = {
        "numpy_gflops": round(numpy_gemm(min_seconds=min_seconds), 1),
        "onnxruntime_mlas_gflops": round(onnxruntime_gemm(min_seconds=min_seconds), 1),
        "n": 1024,
    }
    r["roofline_gflops"] = max(r["numpy_gflops"], r["onnxruntime_mlas_gflops"])
    return r
