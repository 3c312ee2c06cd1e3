"""Execution providers are chosen explicitly, and a missing GPU degrades to the CPU with a clear log line."""
from __future__ import annotations

import logging

import pytest

from service.engine import CUDA_OPTIONS, choose_providers


def test_cuda_first_when_onnxruntime_offers_it():
    chosen = choose_providers("cuda,cpu", ["CUDAExecutionProvider", "CPUExecutionProvider"])
    assert chosen == [("CUDAExecutionProvider", CUDA_OPTIONS), ("CPUExecutionProvider", {})]
    assert CUDA_OPTIONS["cudnn_conv_algo_search"] != "EXHAUSTIVE"  # the first request must not pay for a search


def test_missing_cuda_falls_back_to_cpu_and_says_so(caplog):
    with caplog.at_level(logging.WARNING, logger="capsnet.engine"):
        chosen = choose_providers("cuda,cpu", ["CPUExecutionProvider"])
    assert chosen == [("CPUExecutionProvider", {})]
    assert "CUDAExecutionProvider requested" in caplog.text and "falling back" in caplog.text


def test_cpu_is_always_last_resort():
    assert choose_providers("cuda", ["CPUExecutionProvider"]) == [("CPUExecutionProvider", {})]


def test_unknown_provider_is_refused():
    with pytest.raises(ValueError, match="unknown execution provider 'tpu'"):
        choose_providers("tpu,cpu", ["CPUExecutionProvider"])


def test_the_real_engine_reports_the_provider_it_runs_on(client):
    engine = client.app.state.capsnet.engine
    assert engine.provider == engine.capsnet.get_providers()[0] == "CPUExecutionProvider"
    assert engine.device == "CPU"
