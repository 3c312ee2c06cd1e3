"""What a worker knows of the others (service/group.py): a load or an unload through one worker waits for the others'
word, says which of them could not do it, and does not wait for ever on one that stays silent."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest

from service.group import ProcessGroup


@pytest.fixture
def other(tmp_path):
    """A group of two: this process and another live one, both marked ready."""
    (tmp_path / "ready").mkdir()
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    group = ProcessGroup(2, tmp_path, supervisor=os.getpid())
    group.mark_ready()
    (tmp_path / "ready" / str(proc.pid)).touch()
    yield group, proc.pid
    proc.kill()
    proc.wait()


def told(group: ProcessGroup) -> int:
    """A generation numbered as _tell_others numbers it, without a supervisor to signal."""
    group._write("generation", str(group.generation() + 1))
    return group.generation()


def ack_as(group: ProcessGroup, pid: int, generation: int, failure: str = "") -> None:
    (group.directory / "acks").mkdir(exist_ok=True)
    (group.directory / "acks" / str(pid)).write_text(f"{generation}\n{failure}")


def test_the_others_word_is_waited_for_and_a_failure_named(other):
    group, pid = other
    generation = told(group)
    ack_as(group, pid, generation - 1)  # done what it was told before: not this
    assert asyncio.run(group.others_done(generation, 0.2)) == {pid: "not done within 0 s"}
    ack_as(group, pid, generation)
    assert asyncio.run(group.others_done(generation, 5.0)) == {}
    ack_as(group, pid, generation + 1, "card.json: not valid JSON")  # a later generation done counts, its failure too
    assert asyncio.run(group.others_done(generation, 5.0)) == {pid: "card.json: not valid JSON"}


def test_a_worker_that_died_is_not_waited_for(other):
    group, pid = other
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    assert asyncio.run(group.others_done(told(group), 30.0)) == {}


def test_generations_count_up_and_acknowledgements_are_per_worker(tmp_path):
    (tmp_path / "ready").mkdir()
    group = ProcessGroup(1, tmp_path, supervisor=os.getpid())
    assert group.generation() == 0
    assert [told(group) for _ in range(3)] == [1, 2, 3]
    group.acknowledge(3, "why")
    assert (tmp_path / "acks" / str(os.getpid())).read_text() == "3\nwhy"
