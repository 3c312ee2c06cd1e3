"""Work off the event loop, in one home: a request's blocking call in a worker thread (`in_thread`, bounded by a limiter
where the work must be, the two-digit network's MAX_AT_ONCE, by anyio's default of 40 threads otherwise), and the
bounded pool that decodes uploads and parses large bodies (`BoundedPool`, `off_loop`).

Why not anyio's `to_thread.run_sync` alone: a request whose client has gone is cancelled (service/http/middleware.py),
and a cancelled `run_sync` returns at once while its thread goes on, giving back the limiter's token as it leaves. A
storm of clients giving up would then run more work at once than the limit allows. Here the caller takes the token
itself, where waiting for it can be cancelled (work never started is never run), and keeps it until the thread has
finished, and only then passes the cancellation on."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol, TypeVar

from anyio import CapacityLimiter, to_thread

from service.errors import Overloaded

T = TypeVar("T")


def name_os_thread(name: str) -> None:
    """Give the calling thread `name` where the kernel shows it (/proc/<pid>/task/<tid>/comm, top -H, py-spy): the
    model's threads and the decode pool's are told apart from the event loop by their names, so that the front's CPU a
    request can be read from /proc (bench/front.py). Linux only, 15 characters; elsewhere nothing happens."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(15, name.encode()[:15], 0, 0, 0)  # PR_SET_NAME
    except (OSError, AttributeError):
        pass


class Pool(Protocol):
    """A bounded pool for work too heavy for the loop, weighed as it is admitted (BoundedPool, in pixels or bytes): what
    `off_loop` and the inputs hand their work to, without knowing the app's state."""

    async def run(self, fn: Callable[[], T], weight: int) -> T: ...


class BoundedPool:
    """`workers` threads for the work too heavy for the loop: uploads decoded (weighed in decoded pixels: a canvas is 78k,
    the largest legal upload 16M) and large bodies parsed (a byte weighed as a pixel). What they hold, running or
    waiting, is bounded, so many small jobs fit where a few huge ones fill it: past the bound, Overloaded (503 with
    Retry-After). A job alone is always admitted, whatever its weight (CAPSNET_DECODE_WORKERS, _POOL_PIXELS)."""

    def __init__(self, workers: int, max_pixels: int) -> None:
        self.workers, self.max_pixels = workers, max_pixels
        self._executor = ThreadPoolExecutor(
            max_workers=workers, thread_name_prefix="capsnet-decode", initializer=name_os_thread, initargs=("capsnet-decode",)
        )
        self._lock = threading.Lock()
        self._pixels = 0  # admitted and not finished: a request whose client left still holds its pixels until its thread is done
        self._jobs = 0

    @property
    def pixels_in_flight(self) -> int:
        return self._pixels

    @property
    def jobs(self) -> int:
        """Decodes and parses admitted and not finished, running or waiting for a thread (capsnet_decode_pool_jobs)."""
        return self._jobs

    async def run(self, fn: Callable[[], T], pixels: int) -> T:
        with self._lock:
            if self._pixels and self._pixels + pixels > self.max_pixels:
                raise Overloaded(
                    f"image decoding is busy ({self._pixels} pixels of uploads in progress, limit {self.max_pixels}); retry shortly"
                )
            self._pixels += pixels
            self._jobs += 1
        fut = self._executor.submit(fn)
        fut.add_done_callback(lambda _: self._release(pixels))
        return await asyncio.wrap_future(fut)

    def _release(self, pixels: int) -> None:
        with self._lock:
            self._pixels -= pixels
            self._jobs -= 1

    def shutdown(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


async def off_loop(pool: Pool, inline_bytes: int, parse: Callable[[bytes], T], data: bytes) -> T:
    """parse(data) on the event loop for a small body (up to `inline_bytes`), in `pool` (a byte weighed as a pixel) for a
    large one."""
    if len(data) <= inline_bytes:
        return parse(data)
    return await pool.run(lambda: parse(data), len(data))


async def in_thread(fn: Callable[..., T], *args: object, limiter: CapacityLimiter | None = None) -> T:
    async with limiter or to_thread.current_default_thread_limiter():
        # the token is held here; the thread's own limiter is a fresh one it never waits on
        work = asyncio.ensure_future(to_thread.run_sync(fn, *args, limiter=CapacityLimiter(1)))
        work.add_done_callback(_collect)
        try:
            return await asyncio.shield(work)
        except asyncio.CancelledError:
            await asyncio.wait([work])  # a thread cannot be stopped: its place is held until it ends
            raise


def _collect(work: asyncio.Future) -> None:
    """What a thread raised after its caller was cancelled has nobody to go to: taken here, not logged as unretrieved."""
    if not work.cancelled():
        work.exception()
