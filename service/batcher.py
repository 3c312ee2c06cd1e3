"""Gathers concurrent /predict requests into batches for one onnxruntime session, off the event loop.

Why: one session call on 16 images costs far less than 16 calls on one, and a bounded queue turns
overload into a quick 503 instead of latency that grows without limit.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

log = logging.getLogger("capsnet.batcher")


class Overloaded(Exception):
    """The queue in front of the model is full, or a request waited longer than its limit."""

    def __init__(self, message: str, retry_after_s: int = 1) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class InferenceFailed(Exception):
    """The model raised on a batch; every request in it gets a 500 with this id."""


@dataclass
class _Job:
    images: np.ndarray  # [n,1,S,S]
    future: asyncio.Future
    enqueued: float = field(default_factory=time.perf_counter)


class Batcher:
    def __init__(
        self,
        run: Callable[[np.ndarray], dict[str, np.ndarray]],
        max_batch: int,
        max_wait_s: float,
        max_queue: int,
        observe: Callable[[int, list[float]], None] | None = None,
    ) -> None:
        self._run = run
        self.max_batch = max_batch
        self.max_wait_s = max_wait_s
        self.max_queue = max_queue
        self._observe = observe or (lambda n, waits: None)
        self._queue: asyncio.Queue[_Job] = asyncio.Queue()
        self._queued_images = 0
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="capsnet-infer")
        self._task: asyncio.Task | None = None

    @property
    def queued_images(self) -> int:
        return self._queued_images

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="capsnet-batcher")

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        self._executor.shutdown(wait=True)

    async def submit(self, images: np.ndarray, timeout_s: float) -> dict[str, np.ndarray]:
        """Queue `images` [n,1,S,S]; their rows of every output come back, in order."""
        n = len(images)
        if self._queued_images + n > self.max_queue:
            raise Overloaded(f"model queue full ({self._queued_images} images waiting, limit {self.max_queue})")
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        self._queued_images += n
        self._queue.put_nowait(_Job(images, fut))
        try:
            return await asyncio.wait_for(asyncio.shield(fut), timeout_s)
        except asyncio.TimeoutError as e:
            raise Overloaded(f"no model slot within {timeout_s:g} s") from e

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            job = await self._queue.get()
            jobs, count = [job], len(job.images)
            deadline = loop.time() + self.max_wait_s
            # Fill the batch with what is already waiting, and wait a little for more if there is room.
            while count < self.max_batch:
                try:
                    nxt = self._queue.get_nowait() if self.max_wait_s == 0 else await asyncio.wait_for(
                        self._queue.get(), max(deadline - loop.time(), 0))
                except (asyncio.QueueEmpty, asyncio.TimeoutError):
                    break
                if count + len(nxt.images) > self.max_batch:
                    # Keep requests whole; the big one opens the next batch.
                    await self._run_batch(jobs, count)
                    jobs, count = [nxt], len(nxt.images)
                    deadline = loop.time() + self.max_wait_s
                    continue
                jobs.append(nxt)
                count += len(nxt.images)
            await self._run_batch(jobs, count)

    async def _run_batch(self, jobs: list[_Job], count: int) -> None:
        live = [j for j in jobs if not j.future.cancelled()]
        self._queued_images -= count
        if not live:
            return
        now = time.perf_counter()
        batch = np.concatenate([j.images for j in live]) if len(live) > 1 else live[0].images
        self._observe(len(batch), [now - j.enqueued for j in live])
        try:
            out = await asyncio.get_running_loop().run_in_executor(self._executor, self._run, batch)
        except Exception as e:  # one bad batch must not stop the loop
            log.exception("inference failed on a batch of %d", len(batch))
            for j in live:
                if not j.future.done():
                    j.future.set_exception(InferenceFailed(str(e)))
            return
        start = 0
        for j in live:
            n = len(j.images)
            if not j.future.done():
                j.future.set_result({k: v[start : start + n] for k, v in out.items()})
            start += n
