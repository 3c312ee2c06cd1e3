"""service/engine/cores.py: how many batches run at once."""

from __future__ import annotations

import os

from service.engine.card import load_card
from service.engine.cores import REMOTE_WORKERS, batches_in_flight, workers
from service.engine.local import load_engine
from service.engine.remote import RemoteEngine
from tests.conftest import WEIGHTS


def test_batches_in_flight_keep_the_model_level_with_the_event_loop():
    assert batches_in_flight(None, 2) == 1  # nothing measured: one
    assert batches_in_flight(1.1, 2) == 1  # INT8 on a fast machine: one thread keeps up
    assert batches_in_flight(1.9, 2) == 1  # INT8 on a slow one: a second batch beside the loop costs more than it adds
    assert batches_in_flight(3.4, 2) == 2  # FP32: it takes two
    assert batches_in_flight(9.0, 4) == 4  # never more than the cores
    assert batches_in_flight(0.1, 8) == 1


def test_workers_follow_the_setting_the_engine_and_the_timing():
    card = load_card(WEIGHTS)
    split = load_engine(WEIGHTS, card, "cpu", threads=2, busy_threads=1)  # a second, one-thread session for busy batches
    single = load_engine(WEIGHTS, card, "cpu", threads=1, busy_threads=1)  # one session: one batch at a time
    remote = RemoteEngine(url="http://127.0.0.1:1", card=card, timeout_s=1.0)  # never connected: only its kind matters
    assert workers(3, split, 9.0) == 3  # CAPSNET_WORKERS wins
    assert workers(0, single, 9.0) == 1
    assert workers(0, remote, None) == REMOTE_WORKERS == 2
    cores = len(os.sched_getaffinity(0))
    assert workers(0, split, 1.1) == 1 and workers(0, split, 50.0) == cores
