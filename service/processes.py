"""Serving a port: one process, or several behind it so that every core of a host takes requests.

One process answers HTTP on one event loop, and on a GPU host that loop's CPU, not the model, sets the rate
(docs/performance.md). With CAPSNET_PROCESSES=N, `python -m service` holds the port and starts N worker processes,
each listening on it with a socket of its own (SO_REUSEPORT) once its models are warm: the kernel spreads new
connections over the workers listening, by a hash of each connection's addresses, and a worker not warm yet takes
none. One socket shared by all would hand a burst of connections to whichever worker woke first (it accepts every
one waiting): 16 keep-alive clients connecting at once landed 14, 15 and 16 on one of two workers. Each worker has its
own copy of the models and its own batcher, and serves gRPC on the gRPC port too, the same way. What makes N processes
one service:

- /metrics: prometheus_client's multiprocess mode. Every worker keeps its counters and histograms in files in one
  directory, and whichever worker is scraped reads them all (service/metrics.py); one scrape target, as before.
- /readyz, /v2/health/ready: ready when every worker is warm (each marks itself in the group's directory).
- SIGTERM: passed to every worker, each drains as one process does; the supervisor exits when all have.
- SIGHUP: passed to every worker, each reloads the weights without downtime (service/loading.py). A load or an unload
  through the model repository extension is done by the worker that took it, which then asks the supervisor (SIGUSR1,
  SIGUSR2) to have the others do the same.
- A worker that dies is replaced, and so is one that hangs: each warm worker's event loop renews its mark every
  second, and one that has not for CAPSNET_WORKER_STALL_S (10 s) is counted as not ready, killed and replaced. Its
  connections are lost with it (a client sees them closed), those waiting in its socket's queue too (Linux's
  net.ipv4.tcp_migrate_req=1 hands those to the others instead); the others take every new one until its replacement
  is warm, and /readyz answers 503 meanwhile. A worker that fails to start (weights that do not load) stops the
  service, as one process would: a start-up failure repeats on every try.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import multiprocessing
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from multiprocessing import resource_tracker
from pathlib import Path

import uvicorn
from prometheus_client import multiprocess

from service.app import create_app
from service.group import HANDLED, RELOAD_OTHERS, UNLOAD_OTHERS, ProcessGroup
from service.http.auth import KeysError
from service.http.framing import JSONFramingErrors
from service.settings import Settings, get_settings
from service.tracing import LogContext

log = logging.getLogger("capsnet.processes")

STARTUP_FAILURE = 3  # uvicorn's code for a server that never started
METRICS_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"  # prometheus_client reads it when imported
PR_SET_PDEATHSIG = 1  # linux/prctl.h
STOPPING = {signal.SIGTERM, signal.SIGINT}  # uvicorn's
PAUSED_S = 2.0  # a supervisor's round this long after the last: the process was paused (rounds come every 0.5 s)


def configure_logging(s: Settings) -> None:
    # a line written while a request is served names it, and its trace when it is traced (service/tracing.py)
    logging.basicConfig(level=s.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s%(context)s: %(message)s")
    for handler in logging.getLogger().handlers:
        handler.addFilter(LogContext())


def _config(app: object, s: Settings) -> uvicorn.Config:
    return uvicorn.Config(
        app,  # type: ignore[arg-type]
        host=s.host,
        port=s.port,
        workers=1,
        lifespan="on",
        log_level=s.log_level.lower(),
        timeout_graceful_shutdown=int(s.graceful_timeout_s),
        timeout_keep_alive=s.keepalive_timeout_s,
        access_log=False,
        server_header=False,
        http=JSONFramingErrors,  # a request that is not HTTP gets the service's JSON error, not uvicorn's plain text
    )


class _Server(uvicorn.Server):
    """uvicorn's server, which tells the app that a drain has begun before it closes its listeners and waits for HTTP's
    requests in flight: gRPC's health turns NOT_SERVING from the first moment of a drain, not once those are done."""

    def __init__(self, config: uvicorn.Config, on_drain: list[Callable[[], Awaitable[None]]]) -> None:
        super().__init__(config)
        self.on_drain = on_drain

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for hook in self.on_drain:
            await hook()
        await super().shutdown(sockets)


def serve(s: Settings, group: ProcessGroup | None = None, sockets: list[socket.socket] | None = None) -> int:
    """One process's server until it stops; its exit code. Alone it binds the port and answers from the first second
    (503 while the models load); in a group it accepts on the supervisor's socket once its models are warm."""
    try:
        app = create_app(s, load_in_background=group is None, group=group)
    except KeysError as e:
        log.error("cannot start: %s", e)
        return STARTUP_FAILURE
    server = _Server(_config(app, s), app.state.capsnet.on_drain)
    app.state.capsnet.stop = lambda: setattr(server, "should_exit", True)  # models that fail to load end the process
    server.run(sockets)
    return STARTUP_FAILURE if not server.started or app.state.capsnet.failed else 0


def _drain_when_orphaned(supervisor: int) -> None:
    """A supervisor killed outright (SIGKILL, OOM) cannot pass SIGTERM on: the kernel sends it to its workers instead
    (Linux's PR_SET_PDEATHSIG), so none goes on serving a port that nobody supervises."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != supervisor:  # it was gone before the line above (the worker now belongs to another process)
        os.kill(os.getpid(), signal.SIGTERM)


def port_socket(host: str, port: int) -> socket.socket:
    """A socket bound to the port beside the group's others (SO_REUSEPORT), not listening: uvicorn listens on it once
    the lifespan (the models' load and warm-up) is done, and only then does the kernel hand it connections."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    return sock


def _worker(address: tuple[str, int], group: ProcessGroup) -> None:
    """A worker process's entry (spawned: a fresh interpreter, whose environment names the metrics directory)."""
    # the supervisor's mask outlives the exec: uvicorn's signals unblocked, the app's once it has their handlers (app.py)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOPPING)
    _drain_when_orphaned(group.supervisor)
    s = get_settings()
    configure_logging(s)
    sys.exit(serve(s, group, [port_socket(*address)]))


class Supervisor:
    """Starts the workers, passes signals on, replaces a worker that dies, and stops when they all have."""

    def __init__(self, s: Settings) -> None:
        self.settings = s
        self.spawn = multiprocessing.get_context("spawn")
        self.workers: list[multiprocessing.process.BaseProcess] = []
        self.stopping_since: float | None = None
        self.code = 0
        self.awake_since = self.last_round = time.monotonic()  # when this process last resumed after a pause; its last round

    def run(self) -> int:
        s = self.settings
        # the port held, never listening (so handed no connection): it resolves port 0 for the workers, and no other
        # program takes the port while they come and go
        sock = port_socket(s.host, s.port)
        address = (s.host, sock.getsockname()[1])
        given = os.environ.get(METRICS_DIR_ENV)
        metrics_dir = Path(given or tempfile.mkdtemp(prefix="capsnet-metrics-"))
        metrics_dir.mkdir(parents=True, exist_ok=True)
        for stale in metrics_dir.glob("*.db"):  # a previous run's counts are not this one's
            stale.unlink()
        os.environ[METRICS_DIR_ENV] = str(metrics_dir)
        group = ProcessGroup(s.processes, Path(tempfile.mkdtemp(prefix="capsnet-group-")), os.getpid(), s.worker_stall_s)
        (group.directory / "ready").mkdir()
        # the signals are taken one at a time below, with the sender's pid, blocked in every thread since the process began
        # (service/__main__.py); multiprocessing's resource tracker is started first, as starting it unblocks SIGINT and
        # SIGTERM on this thread, then they are blocked again
        resource_tracker.ensure_running()
        signal.pthread_sigmask(signal.SIG_BLOCK, HANDLED)
        log.info("%d worker processes on %s:%d (metrics in %s)", s.processes, *address, metrics_dir)
        try:
            self.workers = [self._start(address, group) for _ in range(s.processes)]
            while self.workers:
                info = signal.sigtimedwait(HANDLED, 0.5)
                # CPython answers a wait cut short by a stop and a continue (SIGSTOP, a paused container) once its
                # timeout is past with a siginfo never filled in: a number that names no signal
                if info is not None and info.si_signo in HANDLED:
                    self._on_signal(info.si_signo, info.si_pid)
                self._note_pause()
                self._kill_stalled(group)
                self._reap(address, group)
                self._hurry()
        finally:
            sock.close()
            shutil.rmtree(group.directory, ignore_errors=True)
            if not given:
                shutil.rmtree(metrics_dir, ignore_errors=True)
        log.info("stopped")
        return self.code

    def _start(self, address: tuple[str, int], group: ProcessGroup) -> multiprocessing.process.BaseProcess:
        worker = self.spawn.Process(target=_worker, args=(address, group), name="capsnet-worker")
        worker.start()
        log.info("worker %d started", worker.pid)
        return worker

    def _on_signal(self, signo: int, sender: int) -> None:
        if signo in (signal.SIGTERM, signal.SIGINT):
            self._stop(0)
            return
        if self.stopping_since is not None:
            return
        passed = {signal.SIGHUP: signal.SIGHUP, RELOAD_OTHERS: signal.SIGHUP, UNLOAD_OTHERS: UNLOAD_OTHERS}[signo]
        for worker in self.workers:
            if worker.pid != sender and worker.exitcode is None:
                os.kill(worker.pid, passed)  # type: ignore[arg-type]

    def _stop(self, code: int) -> None:
        if self.stopping_since is None:
            self.stopping_since, self.code = time.monotonic(), code
            log.info("stopping: the workers drain")
            for worker in self.workers:
                if worker.exitcode is None:
                    os.kill(worker.pid, signal.SIGTERM)  # type: ignore[arg-type]

    def _hurry(self) -> None:
        """A worker still there well past the drain's grace is killed."""
        if self.stopping_since is not None and time.monotonic() - self.stopping_since > self.settings.graceful_timeout_s + 10:
            for worker in self.workers:
                if worker.exitcode is None:
                    worker.kill()

    def _note_pause(self) -> None:
        """A round long after the last (they come every half second): this process did not run meanwhile (its container
        paused, the machine suspended, the process group stopped), and its workers may not have either."""
        now = time.monotonic()
        if now - self.last_round > PAUSED_S:
            self.awake_since = now
        self.last_round = now

    def _kill_stalled(self, group: ProcessGroup) -> None:
        """A warm worker whose event loop has stopped renewing its mark is killed, then replaced as one that died: hung, it
        would hold the connections the kernel hands it, and answer none (a drain is judged by _hurry instead). After a
        pause of this process the workers first get a whole stall limit to renew their marks: paused with it, none hung."""
        if self.stopping_since is not None or time.monotonic() - self.awake_since < group.stall_s:
            return
        for worker in self.workers:
            if worker.exitcode is None and (age := group.stalled(worker.pid)) is not None:  # type: ignore[arg-type]
                log.error("worker %d has not marked itself alive for %.0f s: killing it", worker.pid, age)
                worker.kill()
                worker.join(5)

    def _reap(self, address: tuple[str, int], group: ProcessGroup) -> None:
        for worker in list(self.workers):
            if worker.exitcode is None:
                continue
            worker.join()
            group.mark_gone(worker.pid)
            multiprocess.mark_process_dead(worker.pid)  # its live gauges go; its counts stay in the sums
            if self.stopping_since is not None:
                self.workers.remove(worker)
            elif worker.exitcode == STARTUP_FAILURE:
                log.error("worker %d could not start: stopping", worker.pid)
                self.workers.remove(worker)
                self._stop(STARTUP_FAILURE)
            else:
                log.error("worker %d died (exit code %s): replacing it", worker.pid, worker.exitcode)
                self.workers[self.workers.index(worker)] = self._start(address, group)


def main() -> None:
    s = get_settings()
    configure_logging(s)
    if s.processes == 1:
        # SIGTERM and SIGINT for uvicorn's handlers, on this thread (the others keep them blocked); SIGHUP once the app
        # has its handler (app.py)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOPPING)
        sys.exit(serve(s))
    sys.exit(Supervisor(s).run())
