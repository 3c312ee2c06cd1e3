"""Where onnxruntime spends its time on capsnet.onnx, by operator type (its own profiler)."""
from __future__ import annotations

import collections
import json
import os
from pathlib import Path

import numpy as np


def measure(weights: Path, batch: int = 32, runs: int = 10) -> dict:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.enable_profiling = True
    opts.profile_file_prefix = "/tmp/capsnet-ort-profile"
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(str(weights / "capsnet.onnx"), opts, providers=["CPUExecutionProvider"])
    x = (np.random.default_rng(0).random((batch, 1, 28, 28)) < 0.2).astype(np.float32)
    for _ in range(runs):
        sess.run(None, {"image": x})
    path = sess.end_profiling()
    events = json.loads(Path(path).read_text())
    os.unlink(path)
    by_op: collections.Counter = collections.Counter()
    nodes: collections.Counter = collections.Counter()
    for e in events:
        if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time"):
            by_op[e["args"]["op_name"]] += e["dur"]
            nodes[e["args"]["op_name"]] += 1
    total = sum(by_op.values())
    rows = [{"op": op, "share": round(us / total, 4), "ms_per_run": round(us / runs / 1000, 3), "nodes": nodes[op] // runs}
            for op, us in by_op.most_common()]
    return {"batch": batch, "runs": runs, "total_ms_per_run": round(total / runs / 1000, 3), "by_op": rows}
