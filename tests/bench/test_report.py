"""BENCHMARKS.md states the issue's targets with the arithmetic from the measured tables."""
from __future__ import annotations

import json

from bench.report import render


def test_targets_are_computed_from_the_results(tmp_path):
    ort = [{"batch": b, "latency_ms": l, "images_per_s": ips, "gflops": 1, "fraction_of_roofline": f}
           for b, l, ips, f in [(1, 1.5, 650.0, 0.68), (16, 21.0, 760.0, 0.8), (32, 42.0, 750.0, 0.79)]]
    row = lambda c, rps, p50: {"concurrency": c, "requests": 10, "throughput_rps": rps, "p50_ms": p50, "p95_ms": p50, "p99_ms": p50, "errors": 0}  # noqa: E731
    (tmp_path / "model.json").write_text(json.dumps({"macs_per_image": {}, "gflop_per_image": 0.41, "onnxruntime": ort,
                                                     "pytorch_eager": None, "decoder_batch1_ms": 0.2}))
    (tmp_path / "service.json").write_text(json.dumps({"duration_s": 1, "precisions": {"fp32": {"endpoints": {
        "/predict": [row(1, 300.0, 3.5), row(16, 456.0, 35.0)], "/reconstruct": [row(1, 1500.0, 0.6), row(16, 1800.0, 8.0)]}}}}))
    md = render(tmp_path)
    assert "| service at 16 clients / best in-process images/s | fp32 | >= 0.6 | 456.0 / 760.0 = 0.60 |" in md
    assert "3.5 - 1.5 = 2.00 ms" in md
    assert "| model at batch >= 16, fraction of the GEMM roofline | fp32 | >= 0.6 | 0.79 |" in md
    assert "| 16 | 10 | 456.0 | 0.6 | 35.0 |" in md  # the /predict table's own ratio column
