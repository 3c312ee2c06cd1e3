"""A request's blocking work leaves the event loop one way (service/threads.py): a request cancelled because its client
went away keeps its place under the limiter until its thread has finished."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from anyio import CapacityLimiter

from service.threads import in_thread


def test_a_cancelled_call_holds_its_limiter_until_its_thread_ends() -> None:
    order, lock = [], threading.Lock()

    def work(name: str) -> str:
        with lock:
            order.append(f"start {name}")
        time.sleep(0.2)
        with lock:
            order.append(f"end {name}")
        return name

    async def main() -> str:
        limiter = CapacityLimiter(1)
        first = asyncio.ensure_future(in_thread(work, "first", limiter=limiter))
        await asyncio.sleep(0.05)  # the first is in its thread
        first.cancel()
        second = asyncio.ensure_future(in_thread(work, "second", limiter=limiter))
        with pytest.raises(asyncio.CancelledError):
            await first
        return await second

    assert asyncio.run(main()) == "second"
    assert order == ["start first", "end first", "start second", "end second"], "never two at once under a limit of one"


def test_the_answer_and_the_errors_come_back_as_from_the_function() -> None:
    def fails() -> None:
        raise ValueError("no")

    assert asyncio.run(in_thread(sum, [1, 2, 3])) == 6
    with pytest.raises(ValueError, match="no"):
        asyncio.run(in_thread(fails))


def test_a_call_given_up_while_waiting_for_the_limiter_never_runs() -> None:
    """The order of events is the test: the waiting call is given up and done while the first still holds the token
    (held by an event, not for a time), and once the first ends, only it has run."""
    ran = []
    started, release = threading.Event(), threading.Event()

    def work(name: str) -> None:
        started.set()
        release.wait(30)
        ran.append(name)

    async def main() -> None:
        limiter = CapacityLimiter(1)
        first = asyncio.ensure_future(in_thread(work, "first", limiter=limiter))
        while not started.is_set():
            await asyncio.sleep(0.01)
        waiting = asyncio.ensure_future(in_thread(work, "waiting", limiter=limiter))
        for _ in range(3):
            await asyncio.sleep(0)  # it asks for the token, which the first holds
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert not first.done(), "given up only after the first call ended, not at once"
        release.set()
        await first
        await asyncio.sleep(0.1)  # a waiting call wrongly let through would run now

    asyncio.run(main())
    assert ran == ["first"]
