"""The model alone, in process: onnxruntime at batch 1/8/32/64 against the GEMM roofline, and PyTorch eager."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from model import DECODER_FILE, FP32_FILE
from model.machine import timed

BATCHES = (1, 8, 32, 64)


def macs_per_image(arch: dict) -> dict[str, int]:
    """Multiply-adds of one forward pass, from the model card's sizes."""
    s, k1, c1 = arch["image_size"], arch["conv1_kernel"], arch["conv1_channels"]
    o1 = s - k1 + 1
    g, kp = arch["primary_grid"], arch["primary_kernel"]
    pc = arch["primary_channels"] * arch["primary_dim"]
    n_i, n_j, d_i, d_j = arch["num_primary_capsules"], arch["num_classes"], arch["primary_dim"], arch["digit_dim"]
    h1, h2 = arch["decoder_hidden"]
    r = arch["routing_iterations"]
    return {
        "conv1": o1 * o1 * c1 * k1 * k1,
        "primary_caps": g * g * pc * c1 * kp * kp,
        "u_hat": n_i * d_i * n_j * d_j,
        "routing": (2 * r - 1) * n_i * n_j * d_j,
        "decoder": n_j * d_j * h1 + h1 * h2 + h2 * s * s,
    }


def model_files(weights: Path) -> dict[str, Path]:
    """{"fp32": capsnet.onnx, "int8": the card's INT8 file if it lists one}: what each precision setting serves."""
    card = json.loads((weights / "model-card.json").read_text())
    return {"fp32": weights / FP32_FILE, **({"int8": weights / card["int8"]["file"]} if "int8" in card else {})}


def session(path: Path, threads: int = 0):
    """onnxruntime's defaults on the CPU (one spinning thread per core): the in-process rate the service is held to.
    `threads` 1: the model on one core, as the service runs a batch while other requests are in flight."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.intra_op_num_threads = threads
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def images_per_s(sess, batch: int, min_seconds: float, rng: np.random.Generator | None = None) -> tuple[float, float]:
    """(median seconds per call, images/s at that median) on MNIST-like sparse inputs."""
    x = ((rng or np.random.default_rng(0)).random((batch, 1, 28, 28)) < 0.2).astype(np.float32)
    med, _ = timed(lambda: sess.run(None, {"image": x}), min_seconds)
    return med, batch / med


def _cuda(path: Path, gflop: float, min_seconds: float) -> list[dict]:
    """The same model on the GPU, inputs bound on the device through IOBinding so copies are not timed."""
    import onnxruntime as ort

    sess = ort.InferenceSession(
        str(path), providers=[("CUDAExecutionProvider", {"cudnn_conv_algo_search": "HEURISTIC"}), "CPUExecutionProvider"]
    )
    rows = []
    for b in BATCHES + (256,):
        x = ort.OrtValue.ortvalue_from_numpy((np.random.default_rng(0).random((b, 1, 28, 28)) < 0.2).astype(np.float32), "cuda", 0)
        binding = sess.io_binding()
        binding.bind_ortvalue_input("image", x)
        for o in sess.get_outputs():
            binding.bind_output(o.name, "cuda")
        med, _ = timed(lambda binding=binding: sess.run_with_iobinding(binding), min_seconds)
        rows.append({"batch": b, "latency_ms": round(med * 1e3, 3), "images_per_s": round(b / med, 1), "gflops": round(b / med * gflop, 1)})
    return rows


def measure(weights: Path, roofline_gflops: float, min_seconds: float = 2.0, torch_too: bool = True) -> dict:
    import onnxruntime as ort

    card = json.loads((weights / "model-card.json").read_text())
    macs = macs_per_image(card["architecture"])
    gflop = 2 * sum(macs.values()) / 1e9
    rng = np.random.default_rng(0)
    out: dict = {"gflop_per_image": round(gflop, 4), "macs_per_image": macs, "onnxruntime": [], "pytorch_eager": []}
    for precision, path in model_files(weights).items():
        rows = out.setdefault("onnxruntime" if precision == "fp32" else "onnxruntime_int8", [])
        sess = session(path)
        for b in BATCHES:
            med, ips = images_per_s(sess, b, min_seconds, rng)
            rows.append(
                {
                    "batch": b,
                    "latency_ms": round(med * 1e3, 3),
                    "images_per_s": round(ips, 1),
                    "gflops": round(ips * gflop, 1),
                    "fraction_of_roofline": round(ips * gflop / roofline_gflops, 3),
                }
            )
    if "CUDAExecutionProvider" in ort.get_available_providers():
        out["onnxruntime_cuda"] = _cuda(weights / FP32_FILE, gflop, min_seconds)
    dsess = session(weights / DECODER_FILE)
    med, _ = timed(lambda: dsess.run(None, {"digit": np.array([3], np.int64), "pose": rng.random((1, 16), np.float32)}), min_seconds / 2)
    out["decoder_batch1_ms"] = round(med * 1e3, 3)
    if torch_too:
        import torch

        from model.capsnet import CapsNet
        from model.onnx_weights import load_onnx_into

        torch.set_num_threads(os.cpu_count() or 1)
        model = CapsNet().eval()
        load_onnx_into(model, weights / FP32_FILE)
        for b in BATCHES:
            x = torch.from_numpy((rng.random((b, 1, 28, 28)) < 0.2).astype(np.float32))
            with torch.inference_mode():
                med, _ = timed(lambda x=x: model(x), min_seconds)
            ips = b / med
            out["pytorch_eager"].append(
                {
                    "batch": b,
                    "latency_ms": round(med * 1e3, 3),
                    "images_per_s": round(ips, 1),
                    "fraction_of_roofline": round(ips * gflop / roofline_gflops, 3),
                }
            )
    return out
