"""Execution providers are chosen explicitly, and a missing GPU degrades to the CPU with a clear log line."""
from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from service.card import load_card
from service.engine import CUDA_OPTIONS, batches_in_flight, choose_providers, load_engine

WEIGHTS = Path(__file__).resolve().parents[2] / "weights"


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


def test_batches_in_flight_keep_the_model_level_with_the_event_loop():
    assert batches_in_flight(None, 2) == 1  # nothing measured: one
    assert batches_in_flight(1.1, 2) == 1  # INT8 here: one thread keeps up
    assert batches_in_flight(2.6, 2) == 2  # FP32 here: it takes two
    assert batches_in_flight(9.0, 4) == 4  # never more than the cores
    assert batches_in_flight(0.1, 8) == 1


def test_under_load_a_second_session_with_fewer_threads_gives_the_same_answers():
    card = load_card(WEIGHTS)
    engine = load_engine(WEIGHTS, card, "cpu", threads=2, busy_threads=1)
    assert engine.capsnet_busy is not None
    x = np.zeros((3, 1, 28, 28), np.float32)
    x[:, :, 6:22, 12:16] = 1.0
    alone, busy = engine.predict(x), engine.predict(x, busy=True)
    for k in alone:
        assert np.allclose(alone[k], busy[k], atol=1e-5), k
    assert load_engine(WEIGHTS, card, "cpu", threads=1, busy_threads=1).capsnet_busy is None  # same threads: one session
    assert engine.warm_up(1) > 0  # ms per image on the busy session, which sets the batches in flight
