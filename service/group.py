"""What a worker process knows of the others behind the same port (service/processes.py starts them): how many there
are, and a directory they share, where each marks itself ready, where the models unloaded through the repository
extension are written for all, and where each says it has done what a load or an unload through another asked."""

from __future__ import annotations

import asyncio
import fcntl
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

RELOAD_OTHERS, UNLOAD_OTHERS = signal.SIGUSR1, signal.SIGUSR2  # from a worker to the supervisor: everyone else, do as I did
# what the supervisor takes, one at a time with the sender's pid (service/processes.py), and blocks in every thread
HANDLED = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP, RELOAD_OTHERS, UNLOAD_OTHERS}
SILENT = "not done within"  # how others_done words a worker that has not acknowledged in time, apart from one that failed


@dataclass(frozen=True)
class ProcessGroup:
    """What a worker knows of its group: how many there are and the directory they share (its state, not the metrics')."""

    size: int
    directory: Path
    supervisor: int  # its pid: the workers' parent, PID 1 itself where it is a container's first process
    stall_s: float = 0.0  # a mark older than this is a hung worker's (Settings.worker_stall_s); 0: marks never go stale

    def mark_ready(self) -> None:
        """Warm, and alive: written once the models are warm, then again every second by the worker's event loop, so
        that a worker whose loop hangs stops being counted (and is replaced: stalled)."""
        mark = self.directory / "ready" / str(os.getpid())
        mark.touch()
        # stamped with the system's monotonic clock, not the wall clock, which a clock set forward would make every mark
        # look old by
        now = time.monotonic()
        os.utime(mark, (now, now))

    def mark_gone(self, pid: int | None = None) -> None:
        (self.directory / "ready" / str(pid or os.getpid())).unlink(missing_ok=True)

    def all_ready(self) -> bool:
        """Every worker is warm: `size` of them marked, each still alive (a killed one cannot take its mark away) and
        its mark fresh (a hung one cannot renew it)."""
        return len(self._ready()) >= self.size

    def stalled(self, pid: int) -> float | None:
        """How long warm worker `pid` has not renewed its mark, when that is longer than `stall_s`; None otherwise (alive,
        not warm yet, gone, or no limit)."""
        if not self.stall_s:
            return None
        try:
            age = time.monotonic() - (self.directory / "ready" / str(pid)).stat().st_mtime
        except FileNotFoundError:
            return None
        return age if age > self.stall_s else None

    def _ready(self) -> list[int]:
        """The pids of the warm workers still alive and not stalled."""
        alive = []
        for entry in os.scandir(self.directory / "ready"):
            try:
                os.kill(pid := int(entry.name), 0)
            except (ProcessLookupError, ValueError):
                continue
            if self.stalled(pid) is None:
                alive.append(pid)
        return alive

    def others_reload(self, unloaded: frozenset[str]) -> int:
        """This worker loaded the weights again through the repository extension: the others do too."""
        return self._tell_others(unloaded, RELOAD_OTHERS)

    def others_unload(self, unloaded: frozenset[str]) -> int:
        return self._tell_others(unloaded, UNLOAD_OTHERS)

    def _tell_others(self, unloaded: frozenset[str], signo: int) -> int:
        """The models out of service are the group's: written for the others (and for a replacement to start with), a
        new generation of the group's models numbered, then the supervisor passes the word on to everyone but this
        worker. Returns the generation, which each of the others acknowledges once it has done as told (`acknowledge`)."""
        self._write("unloaded", "\n".join(sorted(unloaded)))
        with open(self.directory / "generation.lock", "a") as lock:  # two loads through two workers at once: two numbers
            fcntl.flock(lock, fcntl.LOCK_EX)
            generation = self.generation() + 1
            self._write("generation", str(generation))
        os.kill(self.supervisor, signo)
        return generation

    def generation(self) -> int:
        """The newest load or unload told to the group: a worker that reads it before doing as told has done at least that."""
        try:
            return int((self.directory / "generation").read_text())
        except (FileNotFoundError, ValueError):
            return 0

    def acknowledge(self, generation: int, failure: str = "") -> None:
        """This worker has done what generation `generation` asked (loaded again, or taken the unloaded models out), or
        says why it could not."""
        (self.directory / "acks").mkdir(exist_ok=True)
        self._write(f"acks/{os.getpid()}", f"{generation}\n{failure}")

    async def others_done(self, generation: int, timeout_s: float) -> dict[int, str]:
        """Wait until every other warm worker has acknowledged `generation`: a load's or an unload's answer then holds for
        the whole group, whichever worker a client's next request reaches. Returns the failures by pid (empty when all
        did as told), and a line for each still silent after `timeout_s`. A worker that dies meanwhile is not waited for:
        its replacement starts with the group's weights and unloaded models."""
        deadline = time.monotonic() + timeout_s
        while True:
            pending, failures = [], {}
            for pid in self._ready():
                if pid == os.getpid():
                    continue
                try:
                    done, failure = (self.directory / "acks" / str(pid)).read_text().split("\n", 1)
                except (FileNotFoundError, ValueError):
                    done, failure = "0", ""
                if int(done or 0) < generation:
                    pending.append(pid)
                elif failure:
                    failures[pid] = failure
            if not pending:
                return failures
            if time.monotonic() >= deadline:
                return {**failures, **{pid: f"{SILENT} {timeout_s:.0f} s" for pid in pending}}
            await asyncio.sleep(0.05)

    def _write(self, name: str, text: str) -> None:
        """Whole or not at all, for readers in other processes."""
        tmp = self.directory / f"{name}.{os.getpid()}.tmp"
        tmp.write_text(text)
        tmp.replace(self.directory / name)

    def unloaded(self) -> frozenset[str]:
        try:
            return frozenset((self.directory / "unloaded").read_text().split())
        except FileNotFoundError:
            return frozenset()
