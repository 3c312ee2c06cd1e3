"""Where onnxruntime spends its time on the model files, by operator type (its own profiler)."""

from __future__ import annotations

import collections
import json
import os
from pathlib import Path

import numpy as np

from bench.model import model_files


def measure(weights: Path, batch: int = 32, runs: int = 10) -> dict:
    """The FP32 file's breakdown, and under "int8" the INT8 file's when the card lists one (the CPU default)."""
    files = model_files(weights)
    out = _profile(files["fp32"], batch, runs)
    if "int8" in files:
        out["int8"] = _profile(files["int8"], batch, runs)
    return out


def _profile(path: Path, batch: int, runs: int) -> dict:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.enable_profiling = True
    opts.profile_file_prefix = "/tmp/capsnet-ort-profile"
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    x = (np.random.default_rng(0).random((batch, 1, 28, 28)) < 0.2).astype(np.float32)
    for _ in range(runs):
        sess.run(None, {"image": x})
    trace = sess.end_profiling()
    events = json.loads(Path(trace).read_text())
    os.unlink(trace)
    by_op: collections.Counter = collections.Counter()
    nodes: collections.Counter = collections.Counter()
    for e in events:
        if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time"):
            by_op[e["args"]["op_name"]] += e["dur"]
            nodes[e["args"]["op_name"]] += 1
    total = sum(by_op.values())
    rows = [
        {"op": op, "share": round(us / total, 4), "ms_per_run": round(us / runs / 1000, 3), "nodes": nodes[op] // runs}
        for op, us in by_op.most_common()
    ]
    return {"file": path.name, "batch": batch, "runs": runs, "total_ms_per_run": round(total / runs / 1000, 3), "by_op": rows}
