"""bench/front.py's reading of the front's CPU: the model's threads are told apart by their names, and the table says
each request's event-loop CPU over /healthz's."""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import numpy as np

from bench.report import render
from harness.server import cpu_by_role


def test_the_models_threads_carry_their_names_and_their_cpu_is_counted_apart(server):
    pid = server.proc.pid
    before = cpu_by_role(pid)
    for _ in range(30):
        assert httpx.post(server.url + "/predict", json={"pixels": np.zeros((28, 28)).tolist()}, timeout=30).status_code == 200
    after = cpu_by_role(pid)
    names = {Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip() for tid in os.listdir(f"/proc/{pid}/task")}
    assert any(n.startswith("capsnet-infer") for n in names), names  # what top -H and py-spy show
    assert after["engine"] > before["engine"] and after["event_loop"] > before["event_loop"]
    assert after["process"] >= sum(after[k] for k in ("event_loop", "engine", "decode", "other")) - 0.05


def test_the_front_table_sets_each_request_beside_healthz(tmp_path):
    row = {"requests_per_s": 100.0, "p50_ms": 1.0, "errors": 0, "front_ms": 0.2, "model_ms": 0.0, "process_ms": 0.2}
    data = {
        "clients": 8,
        "duration_s": 6.0,
        "service": {"GET /healthz": {**row, "event_loop_ms": 0.1}, "/predict": {**row, "event_loop_ms": 0.35}},
        "peer": None,
    }
    (tmp_path / "front.json").write_text(json.dumps(data))
    text = render(tmp_path)
    assert "## The front's CPU a request" in text and "| /predict | 100.0 | 1.0 | 0.35 | 0.2 | 0.0 | 0.2 | 0 | 3.5x |" in text


def test_the_loops_profile_is_a_table_of_phases(tmp_path):
    row = {"requests_per_s": 100.0, "p50_ms": 1.0, "errors": 0, "front_ms": 0.2, "model_ms": 0.0, "process_ms": 0.2, "event_loop_ms": 0.1}
    profile = {
        "request": "/predict",
        "samples": 40,
        "loop_ms": 0.8,
        "phases": [{"phase": "decoding and preprocessing", "share": 0.75, "ms_per_request": 0.6}],
    }
    data = {"clients": 8, "duration_s": 6.0, "service": {"GET /healthz": row}, "peer": None, "loop_profile": profile}
    (tmp_path / "front.json").write_text(json.dumps(data))
    text = render(tmp_path)
    assert "py-spy's 40 samples of the main thread" in text and "| decoding and preprocessing | 75.0% | 0.6 |" in text


def test_the_peer_is_set_beside_the_service_round_by_round(tmp_path):
    """Each round's ratio is taken between runs seconds apart; the table gives their median and range, not one pass each."""

    def run(loop: float, process: float, rate: float) -> dict:
        return {
            "requests_per_s": rate,
            "p50_ms": 1.0,
            "errors": 0,
            "event_loop_ms": loop,
            "front_ms": 0.0,
            "model_ms": 0.0,
            "process_ms": process,
        }

    service = [run(1.0, 3.0, 400.0), run(2.0, 6.0, 200.0), run(1.2, 3.3, 390.0)]  # the machine slowed in round two
    peer = [run(0.8, 4.0, 300.0), run(1.6, 8.0, 150.0), run(1.0, 4.4, 280.0)]
    side = {"rounds": 3, "duration_s": 3.0, "kinds": {"/predict": {"service": service, "peer": peer}}}
    health = {"requests_per_s": 1.0, "p50_ms": 1.0, "errors": 0, "event_loop_ms": 0.1, "front_ms": 0.1, "model_ms": 0.0, "process_ms": 0.1}
    data = {"clients": 8, "duration_s": 6.0, "service": {"GET /healthz": health}, "side_by_side": side, "peer_file": "shared/peers/p.py"}
    (tmp_path / "front.json").write_text(json.dumps(data))
    text = render(tmp_path)
    assert "| /predict | service | 390.0 | 1.0 | 1.2 | 3.3 | 0 |" in text and "|  | peer | 280.0 | 1.0 | 1.0 | 4.4 | 0 |" in text
    assert "| /predict | 1.25 (1.20-1.25) | 0.75 (0.75-0.75) | 1.33 (1.33-1.39) |" in text
