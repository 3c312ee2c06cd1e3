"""The profiler breakdown of the committed model files: what BENCHMARKS.md says about where the time goes."""

from __future__ import annotations

from bench.profile import measure
from harness.server import REPO


def test_both_committed_files_are_broken_down_by_operator_and_the_shares_add_up():
    prof = measure(REPO / "weights", batch=2, runs=2)
    fp32_ops = {r["op"] for r in prof["by_op"]}
    int8_ops = {r["op"] for r in prof["int8"]["by_op"]}
    assert "Conv" in fp32_ops and "QLinearConv" not in fp32_ops
    assert "QLinearConv" in int8_ops  # the INT8 file's convolutions really run quantised
    for p in (prof, prof["int8"]):
        assert abs(sum(r["share"] for r in p["by_op"]) - 1) < 0.01 and p["total_ms_per_run"] > 0
    assert prof["int8"]["file"] == "capsnet-int8.onnx"
