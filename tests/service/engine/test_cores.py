"""service/engine/cores.py: how many batches run at once, and how many cores a process may use."""

from __future__ import annotations

import os

import pytest

from service.engine.card import load_card
from service.engine.cores import REMOTE_WORKERS, available_cores, batches_in_flight, workers
from service.engine.local import load_engine
from service.engine.remote import RemoteEngine
from service.settings import Settings
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
    assert workers(0, split, 1.1) == 1 and workers(0, split, 50.0) == available_cores()


def _cgroup(tmp_path, v2: str | None = None, v1: tuple[str, str] | None = None, own: str = "/"):
    """A cgroup tree as a container sees it: cgroup v2's cpu.max in the process's own group, or v1's quota and period."""
    (tmp_path / "self").write_text(f"0::{own}\n")
    if v2 is not None:
        group = tmp_path / own.lstrip("/")
        group.mkdir(parents=True, exist_ok=True)
        (group / "cpu.max").write_text(v2 + "\n")
    if v1 is not None:
        (tmp_path / "cpu").mkdir()
        (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text(v1[0] + "\n")
        (tmp_path / "cpu" / "cpu.cfs_period_us").write_text(v1[1] + "\n")
    return {"cgroup_root": tmp_path, "self_cgroup": tmp_path / "self"}


@pytest.mark.parametrize(
    ("affinity", "limit", "cores"),
    [
        (8, {}, 8),  # no cgroup to read: the affinity
        (8, {"v2": "max 100000"}, 8),  # no quota
        (8, {"v2": "100000 100000"}, 1),  # docker run --cpus=1
        (8, {"v2": "150000 100000"}, 1),  # 1.5 CPUs: one whole core
        (8, {"v2": "250000 100000", "own": "/kubepods/pod1/c1"}, 2),  # a Kubernetes limit of 2.5 CPUs, in its own group
        (2, {"v2": "400000 100000"}, 2),  # a quota over the cpuset: the cpuset
        (8, {"v2": "50000 100000"}, 1),  # half a CPU: still one
        (8, {"v1": ("200000", "100000")}, 2),  # cgroup v1
        (8, {"v1": ("-1", "100000")}, 8),  # cgroup v1, no quota
    ],
)
def test_the_cores_a_process_may_use_are_its_affinity_within_its_cpu_quota(monkeypatch, tmp_path, affinity, limit, cores):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(affinity)))
    assert available_cores(**_cgroup(tmp_path, **limit)) == cores


@pytest.mark.parametrize(("cores", "processes"), [(1, 1), (2, 2), (16, 2)])
def test_two_worker_processes_by_default_one_where_one_cpu_is_all_there_is(monkeypatch, cores, processes):
    monkeypatch.delenv("CAPSNET_PROCESSES", raising=False)
    monkeypatch.setattr("service.settings.available_cores", lambda: cores)
    assert Settings().processes == processes
