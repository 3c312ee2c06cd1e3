"""The one way a request's blocking work leaves the event loop: a worker thread, bounded by a limiter where the work
must be (the two-digit network's MAX_AT_ONCE), by anyio's default of 40 threads otherwise.

Why not anyio's `to_thread.run_sync` alone: a request whose client has gone is cancelled (service/http/middleware.py),
and a cancelled `run_sync` returns at once while its thread goes on, giving back the limiter's token as it leaves. A
storm of clients giving up would then run more work at once than the limit allows. Here the caller takes the token
itself, where waiting for it can be cancelled (work never started is never run), and keeps it until the thread has
finished, and only then passes the cancellation on."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol, TypeVar

from anyio import CapacityLimiter, to_thread

T = TypeVar("T")


class Pool(Protocol):
    """A bounded pool for work too heavy for the loop, weighed as it is admitted (service/inputs/uploads.DecodePool, in
    pixels or bytes): what `off_loop` and the inputs hand their work to, without knowing the app's state."""

    async def run(self, fn: Callable[[], T], weight: int) -> T: ...


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
