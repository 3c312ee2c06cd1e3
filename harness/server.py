"""`python -m service` as a subprocess on a free loopback port: how benchmarks and tests run the real thing."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_stat(path: Path) -> tuple[int, float]:
    """From a /proc/<pid>/stat (or a thread's task/<tid>/stat): the parent's pid, and the CPU seconds (user + system)
    spent so far."""
    fields = path.read_text().rsplit(")", 1)[1].split()  # after the command's name, which may hold spaces and ')'
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def process_cpu_seconds(pid: int) -> float:
    """CPU seconds that process `pid` has spent so far, all its threads together (ended ones too)."""
    return proc_stat(Path(f"/proc/{pid}/stat"))[1]


def children(pid: int) -> list[int]:
    """The processes `pid` started that are alive now (a supervisor's workers: service/processes.py)."""
    kids: list[int] = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            kids += [int(c) for c in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
        except FileNotFoundError:
            continue
    return kids


def connections_held(pid: int, port: int) -> int:
    """Established TCP connections on `port` whose socket the process holds (read from /proc, as `ss -p` reads them)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            link = os.readlink(fd)
        except OSError:  # closed meanwhile
            continue
        if link.startswith("socket:["):
            inodes.add(link[len("socket:[") : -1])
    held = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            established = fields[3] == "01"
            if established and int(fields[1].rsplit(":", 1)[1], 16) == port and fields[9] in inodes:
                held += 1
    return held


def workers(pid: int) -> list[int]:
    """A supervisor's worker processes alive now (its other child is multiprocessing's resource tracker)."""
    out = []
    for kid in children(pid):
        try:
            if b"spawn_main" in Path(f"/proc/{kid}/cmdline").read_bytes():
                out.append(kid)
        except FileNotFoundError:
            continue
    return out


def group_cpu_seconds(pid: int) -> float:
    """CPU seconds so far of process `pid` and of the processes it started that are alive now, all threads together."""
    total = process_cpu_seconds(pid)
    for kid in children(pid):
        try:
            total += process_cpu_seconds(kid)
        except FileNotFoundError:
            continue
    return total


def cpu_by_role(pid: int) -> dict[str, float]:
    """CPU seconds so far of process `pid`'s threads alive now, by what they do as their names say (service/threads.py
    names them): `event_loop` (the main thread), `engine` (capsnet-infer-*: the model), `decode` (capsnet-decode: the
    bounded pool) and `other` (anyio's workers, onnxruntime's own, gRPC's); `process` is all of them, ended ones too."""
    roles = {"event_loop": 0.0, "engine": 0.0, "decode": 0.0, "other": 0.0}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            _, cpu = proc_stat(Path(f"/proc/{pid}/task/{tid}/stat"))
            name = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
        except (FileNotFoundError, ProcessLookupError):
            continue
        role = (
            "event_loop"
            if int(tid) == pid
            else "engine"
            if name.startswith("capsnet-infer")
            else "decode"
            if name == "capsnet-decode"
            else "other"
        )
        roles[role] += cpu
    return {**roles, "process": process_cpu_seconds(pid)}


class Server:
    """The same entry point as the Docker image's CMD, with CAPSNET_* settings from `env`."""

    def __init__(self, env: dict[str, str] | None = None, weights: Path | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        e = {k: v for k, v in os.environ.items() if not k.startswith("CAPSNET_")}
        # one process unless asked for more: what tests and benchmarks read of a server (its threads' CPU from /proc, its
        # own metrics and statistics) is one process's
        e.update({"CAPSNET_PORT": str(self.port), "CAPSNET_HOST": "127.0.0.1", "CAPSNET_PROCESSES": "1"})
        if weights:
            e["CAPSNET_WEIGHTS_DIR"] = str(weights)
        e.update(env or {})
        # a file, not a pipe: nobody reads a pipe while load runs, and a full one would block the server's logging
        self.log = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 (open while the server lives: output() reads it)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "service"], cwd=REPO, env=e, stdout=self.log, stderr=subprocess.STDOUT, text=True
        )

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read()

    def wait_ready(self, timeout: float = 60.0) -> Server:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"service exited {self.proc.returncode}: {self.output()}")
            try:
                with urllib.request.urlopen(self.url + "/readyz", timeout=1) as r:
                    if r.status == 200:
                        return self
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        self.stop()
        raise TimeoutError(f"service not ready within {timeout} s")

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
        return float("nan")

    def thread_cpu_seconds(self) -> tuple[float, float]:
        """CPU seconds so far of the server's event-loop thread (the main one) and of all its other threads
        (onnxruntime's, the batcher's inference threads, anyio's); what is gone with exited threads is not counted."""
        roles = cpu_by_role(self.proc.pid)
        return roles["event_loop"], roles["engine"] + roles["decode"] + roles["other"]

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> str:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return self.output()
