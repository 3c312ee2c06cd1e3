"""What a worker process knows of the others behind the same port (service/processes.py starts them): how many there
are, and a directory they share, where each marks itself ready and where the models unloaded through the repository
extension are written for all."""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from pathlib import Path

RELOAD_OTHERS, UNLOAD_OTHERS = signal.SIGUSR1, signal.SIGUSR2  # from a worker to the supervisor: everyone else, do as I did


@dataclass(frozen=True)
class ProcessGroup:
    """What a worker knows of its group: how many there are and the directory they share (its state, not the metrics')."""

    size: int
    directory: Path
    supervisor: int  # its pid: the workers' parent, PID 1 itself where it is a container's first process

    def mark_ready(self) -> None:
        (self.directory / "ready" / str(os.getpid())).touch()

    def mark_gone(self, pid: int | None = None) -> None:
        (self.directory / "ready" / str(pid or os.getpid())).unlink(missing_ok=True)

    def all_ready(self) -> bool:
        """Every worker is warm: `size` of them marked, each still alive (a killed one cannot take its mark away)."""
        alive = 0
        for entry in os.scandir(self.directory / "ready"):
            try:
                os.kill(int(entry.name), 0)
            except (ProcessLookupError, ValueError):
                continue
            alive += 1
        return alive >= self.size

    def others_reload(self, unloaded: frozenset[str]) -> None:
        """This worker loaded the weights again through the repository extension: the others do too."""
        self._tell_others(unloaded, RELOAD_OTHERS)

    def others_unload(self, unloaded: frozenset[str]) -> None:
        self._tell_others(unloaded, UNLOAD_OTHERS)

    def _tell_others(self, unloaded: frozenset[str], signo: int) -> None:
        """The models out of service are the group's: written for the others (and for a replacement to start with), then
        the supervisor passes the word on to everyone but this worker."""
        tmp = self.directory / f"unloaded.{os.getpid()}"
        tmp.write_text("\n".join(sorted(unloaded)))
        tmp.replace(self.directory / "unloaded")
        os.kill(self.supervisor, signo)

    def unloaded(self) -> frozenset[str]:
        try:
            return frozenset((self.directory / "unloaded").read_text().split())
        except FileNotFoundError:
            return frozenset()
