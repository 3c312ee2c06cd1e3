"""Slow clients as a stranger sends them: connections whose headers never end (slowloris) and bodies trickled at 10
bytes a second, each kind from its own loopback address other than 127.0.0.1 (the edge limits connections an address),
in processes of their own so that the attack does not share an interpreter with whoever measures the service under it.
tests/edge asserts that every attacking connection is cut; bench/edge measures /predict while the attack goes on.
Loopback only."""

from __future__ import annotations

import contextlib
import multiprocessing
import queue
import selectors
import socket
import time
from dataclasses import dataclass
from multiprocessing.synchronize import Event as EventType
from types import TracebackType

from harness.server import process_cpu_seconds

LOOPBACK_SOURCES = (("127.0.0.2", "127.0.0.5"), ("127.0.0.3", "127.0.0.6"))  # (slowloris, trickle) for each process
DRIP_S = 0.1  # one byte from each trickler this often: 10 bytes a second


@dataclass(frozen=True, slots=True)
class Closed:
    """One attacking connection as it ended: its kind, how long after it opened the server closed it (None: it was
    still open when the attack ended) and the first bytes the server answered it with."""

    kind: str
    after_s: float | None
    answer: bytes


def _open(kind: str, source: str, port: int, declared: int) -> socket.socket:
    s = socket.socket()
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    if kind == "slowloris":
        s.sendall(b"POST /predict HTTP/1.1\r\nHost: capsnet\r\nX-Slow: ")  # the headers never end
    else:
        s.sendall(
            b"POST /predict HTTP/1.1\r\nHost: capsnet\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {declared}\r\n\r\n".encode()
        )
    s.setblocking(False)
    return s


def _attack(
    sources: tuple[str, str],
    port: int,
    slowloris: int,
    tricklers: int,
    declared: int,
    seconds: float,
    renew: bool,
    opened: EventType,
    out: multiprocessing.Queue,
) -> None:
    """Hold the connections for `seconds` from when all are open (`opened` set), opening a new one in place of each the
    server cuts when `renew` (as an attacker would); put every ended connection, as Closed, on `out`."""
    sel = selectors.DefaultSelector()
    live: dict[socket.socket, tuple[str, float]] = {}

    def add(kind: str) -> None:
        s = _open(kind, sources[kind == "trickle"], port, declared)
        sel.register(s, selectors.EVENT_READ)
        live[s] = (kind, time.monotonic())

    for i in range(slowloris + tricklers):
        add("slowloris" if i < slowloris else "trickle")
    opened.set()
    closed: list[Closed] = []
    first: dict[socket.socket, bytes] = {}
    end = time.monotonic() + seconds
    next_drip = time.monotonic()
    while live and time.monotonic() < end:
        if time.monotonic() >= next_drip:
            for s, (kind, _) in live.items():
                if kind == "trickle":
                    with contextlib.suppress(OSError):
                        s.send(b" ")
            next_drip += DRIP_S
        for key, _ in sel.select(timeout=0.05):
            s = key.fileobj
            try:
                data = s.recv(4096)
            except OSError:
                data = b""
            if data:
                first[s] = first.get(s, b"") + data
                continue
            kind, t0 = live.pop(s)
            closed.append(Closed(kind, time.monotonic() - t0, first.pop(s, b"")[:2000]))
            sel.unregister(s)
            s.close()
            if renew:
                add(kind)
    for s, (kind, _) in live.items():
        closed.append(Closed(kind, None, first.get(s, b"")[:2000]))
        s.close()
    out.put(closed)


class SlowClients:
    """`with SlowClients(port, seconds) as attack:` holds `slowloris` + `tricklers` connections from each of
    len(LOOPBACK_SOURCES) processes on the server at `port`, for `seconds` once they are open (`attack.wait_open()`).
    Once the block has ended (the exit waits out the attack), `attack.closed` lists every attacking connection."""

    def __init__(
        self, port: int, seconds: float, slowloris: int = 1500, tricklers: int = 20, declared: int = 3000, renew: bool = False
    ) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._results: multiprocessing.Queue = ctx.Queue()
        self._opened = [ctx.Event() for _ in LOOPBACK_SOURCES]
        self._seconds = seconds
        self._processes = [
            ctx.Process(target=_attack, args=(sources, port, slowloris, tricklers, declared, seconds, renew, opened, self._results))
            for sources, opened in zip(LOOPBACK_SOURCES, self._opened, strict=True)
        ]
        self.closed: list[Closed] = []

    def __enter__(self) -> SlowClients:
        for p in self._processes:
            p.start()
        return self

    def wait_open(self, timeout: float = 60) -> None:
        """Until every attacking connection is open; an error at once when a process ended first (its traceback is
        above)."""
        deadline = time.monotonic() + timeout
        for p, opened in zip(self._processes, self._opened, strict=True):
            while not opened.wait(0.1):
                if not p.is_alive() or time.monotonic() > deadline:
                    raise RuntimeError("an attacking process could not open its connections")

    def cpu_seconds(self) -> float:
        """CPU seconds the attacking processes have spent so far: what the attack itself takes from the machine's cores."""
        return sum(process_cpu_seconds(p.pid) for p in self._processes if p.pid is not None and p.is_alive())

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        try:
            if kind is None:
                for reported in range(len(self._processes)):
                    self.closed += self._report(reported)
        finally:
            for p in self._processes:
                p.join(timeout=30 if kind is None else 0)
                if p.is_alive():
                    p.kill()
                    p.join()

    def _report(self, reported: int) -> list[Closed]:
        """The next process's report, `reported` having come; an error at once when more processes have ended than have
        reported (a report is in the queue before its process ends), not after the attack's whole time."""
        deadline = time.monotonic() + self._seconds + 60
        while True:
            try:
                return self._results.get(timeout=0.5)
            except queue.Empty:
                ended = sum(not p.is_alive() for p in self._processes)
                if (ended > reported and self._results.empty()) or time.monotonic() > deadline:
                    raise RuntimeError("an attacking process ended without reporting its connections") from None
