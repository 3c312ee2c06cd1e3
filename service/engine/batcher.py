"""Gathers concurrent /predict requests into batches for the model, run on threads of its own.

Why batches: one session call on 16 images costs far less than 16 calls on one, and a bounded queue
turns overload into a quick 503 instead of latency that grows without limit.

Why the batches are formed on the inference thread, not by a task on the event loop: under load the loop
has dozens of callbacks ready, and a batcher task waiting its turn among them left the model idle between
batches. Here the thread takes the next batch the moment the last one returns, and the event loop only
hands jobs in and results out (INT8, one thread per batch, 16 clients: 640 req/s with the batcher on the
event loop, 708 on its own thread).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from service.errors import EngineUnavailable, InferenceFailed, Overloaded, TooLarge
from service.metrics import progress
from service.threads import name_os_thread

log = logging.getLogger("capsnet.batcher")


@dataclass(eq=False)  # a job is itself: the queue finds it by identity, never by comparing its images
class _Job:
    images: np.ndarray  # [n,1,S,S]
    future: asyncio.Future  # set on the event loop only
    explain: bool = True  # the counterfactual decodes are wanted
    fetch: frozenset[str] = frozenset()  # graph outputs wanted beyond those every answer reads (service.engine.outputs.EXTRA_OUTPUTS)
    enqueued: float = field(default_factory=time.perf_counter)
    queue_s: float = 0.0  # set on the inference thread before the future is
    model_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Inference:
    """A request's rows of every output, and where its time went: waiting for a batch, then the batch in the model."""

    out: dict[str, np.ndarray]
    queue_s: float
    model_s: float


class Batcher:
    def __init__(
        self,
        run: Callable[[np.ndarray, bool, np.ndarray | None, frozenset[str]], dict[str, np.ndarray]],
        max_batch: int,
        max_wait_s: float,
        max_queue: int,
        observe: Callable[[int, bool], None] | None = None,
        workers: int = 1,
        working: Callable[[], int] | None = None,
    ) -> None:
        self._run = run
        self.max_batch = max_batch
        self.max_wait_s = max_wait_s
        self.workers = workers
        self.max_queue = max_queue
        self._observe = observe or (lambda n, busy: None)  # each batch's size, and whether the service was busy
        self._pending: deque[_Job] = deque()  # guarded by _cond, as are _queued_images and _stopping
        self._cond = threading.Condition()
        self._queued_images = 0
        self._running = 0  # batches in the model now
        self._working = working or (lambda: 0)  # requests the service is working on, this batch's among them
        self._stopping = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._threads: list[threading.Thread] = []

    @property
    def queued_images(self) -> int:
        """Images waiting for a batch (not those the model is running)."""
        return self._queued_images

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._threads = [threading.Thread(target=self._work, name=f"capsnet-infer-{k}", daemon=True) for k in range(self.workers)]
        for t in self._threads:
            t.start()

    async def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        for t in self._threads:
            await asyncio.to_thread(t.join)  # the batch in flight, if any, finishes first
        with self._cond:
            left, self._pending = list(self._pending), deque()
            self._queued_images = 0
        for j in left:
            if not j.future.done():
                j.future.set_exception(Overloaded("the service is stopping"))

    async def submit(self, images: np.ndarray, timeout_s: float, explain: bool = True, fetch: frozenset[str] = frozenset()) -> Inference:
        """Queue `images` [n,1,S,S]; their rows of every output come back, in order, with the time spent on them.
        `explain`: with the counterfactual decodes (Engine.predict); a batch runs them for the rows that want them.
        `fetch`: graph outputs beyond the base ones (service.engine.outputs.EXTRA_OUTPUTS), none unless asked; a batch fetches what any of
        its requests asked for, so a request may get more rows than it asked for, never fewer."""
        n = len(images)
        if n > self.max_queue:  # it would never fit, however long it waited: not a 503 to retry
            raise TooLarge(
                f"{n} images in one request, more than the model's queue holds ({self.max_queue}, CAPSNET_MAX_QUEUE): send fewer at once"
            )
        fut = asyncio.get_running_loop().create_future()
        job = _Job(images, fut, explain, frozenset(fetch))
        with self._cond:
            if self._stopping:
                raise Overloaded("the service is stopping")
            if self._queued_images + n > self.max_queue:
                raise Overloaded(f"model queue full ({self._queued_images} images waiting, limit {self.max_queue})")
            self._queued_images += n
            self._pending.append(job)
            self._cond.notify()
        try:
            # On timeout (or a client gone) the future is cancelled: a job still waiting leaves the queue at once, so the
            # queue's count stays exact; one already in a batch is skipped or, if the batch is running, finishes unread.
            async with asyncio.timeout(timeout_s):
                return Inference(await fut, job.queue_s, job.model_s)
        except TimeoutError as e:
            self._withdraw(job)
            raise Overloaded(f"no model slot within {timeout_s:g} s") from e
        except asyncio.CancelledError:
            if not self._withdraw(job):
                progress().phase = "predict"
            raise

    def _withdraw(self, job: _Job) -> bool:
        """Take a job that no one waits for out of the queue; False when a batch has it already."""
        with self._cond:
            try:
                self._pending.remove(job)
            except ValueError:
                return False
            self._queued_images -= len(job.images)
            return True

    # ---- the inference thread ----

    def _take(self, jobs: list[_Job], count: int) -> int:
        """Move waiting jobs into the batch while they fit whole (the first one always does). Holds _cond."""
        while self._pending and (not jobs or count + len(self._pending[0].images) <= self.max_batch):
            job = self._pending.popleft()
            self._queued_images -= len(job.images)
            jobs.append(job)
            count += len(job.images)
        return count

    def _next_batch(self) -> tuple[list[_Job], bool] | None:
        """What is waiting now, plus what arrives within max_wait_s while there is room; and whether the service is busy:
        other requests it is working on (Metrics.working: not those still receiving their body) or another batch running
        (the model runs a lone batch on every core, and a batch under load on fewer, leaving the event loop a core: while
        other requests are being served it has work; see Engine.predict). None when stopping."""
        with self._cond:
            while not self._pending and not self._stopping:
                self._cond.wait()
            if self._stopping:
                return None
            jobs: list[_Job] = []
            count = self._take(jobs, 0)
            deadline = time.monotonic() + self.max_wait_s
            while count < self.max_batch and not self._pending and not self._stopping:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
                count = self._take(jobs, count)
            self._running += 1
            busy = self._working() > len(jobs) or self._running > 1
            return jobs, busy

    def _work(self) -> None:
        name_os_thread(threading.current_thread().name)  # capsnet-infer-<k>: the model's CPU, apart in /proc
        while (taken := self._next_batch()) is not None:
            jobs, busy = taken
            try:
                self._run_batch(jobs, busy)
            except Exception as e:  # one bad batch fails its requests; the thread, and the service, go on
                log.exception("inference failed on a batch of %d requests", len(jobs))
                self._hand_back(self._fail, jobs, e)
            finally:
                with self._cond:
                    self._running -= 1

    def _run_batch(self, jobs: list[_Job], busy: bool) -> None:
        live = [j for j in jobs if not j.future.cancelled()]
        if not live:
            return
        batch = np.concatenate([j.images for j in live]) if len(live) > 1 else live[0].images
        self._observe(len(batch), busy)
        explain = None if all(j.explain for j in live) else np.concatenate([np.full(len(j.images), j.explain) for j in live])
        fetch = frozenset().union(*(j.fetch for j in live))
        start = time.perf_counter()
        out = self._run(batch, busy, explain, fetch)
        model_s = time.perf_counter() - start
        for j in live:
            j.queue_s, j.model_s = start - j.enqueued, model_s
        self._hand_back(self._deliver, live, out)

    def _hand_back(self, fn: Callable, *args: object) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting any more
            self._loop.call_soon_threadsafe(fn, *args)  # type: ignore[union-attr]

    # ---- back on the event loop ----

    @staticmethod
    def _deliver(live: list[_Job], out: dict[str, np.ndarray]) -> None:
        start = 0
        for j in live:
            n = len(j.images)
            if not j.future.done():
                j.future.set_result({k: v[start : start + n] for k, v in out.items()})
            start += n

    @staticmethod
    def _fail(live: list[_Job], error: Exception) -> None:
        # the engine being away is the engine's state, not this request's fault: it stays a 503 (EngineUnavailable)
        failure = error if isinstance(error, EngineUnavailable) else InferenceFailed(str(error))
        for j in live:
            if not j.future.done():
                j.future.set_exception(failure)
