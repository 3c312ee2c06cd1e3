"""The batcher gathers concurrent requests into one call, gives each its own rows, and bounds its queue."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

from service.engine.batcher import Batcher, InferenceFailed, Overloaded
from service.errors import TooLarge


def fake_model(calls: list[int], gate: threading.Event | None = None):
    """A stand-in for onnxruntime whose output rows identify their input rows."""

    def run(x: np.ndarray, busy: bool = False, explain: np.ndarray | None = None, fetch: frozenset = frozenset()) -> dict[str, np.ndarray]:
        if gate is not None:
            gate.wait(5)
        calls.append(len(x))
        return {"id": x.reshape(len(x), -1)[:, 0].copy(), "double": 2 * x}

    return run


def images(*ids: float) -> np.ndarray:
    return np.stack([np.full((1, 2, 2), i, np.float32) for i in ids])


async def taken(b: Batcher) -> None:
    """Until the batcher's thread has taken every image submitted so far into a batch: however long a loaded machine
    takes to schedule that thread, not a fixed sleep that it may outlast."""
    await asyncio.sleep(0)  # the submits scheduled before this have queued their images
    while b.queued_images:
        await asyncio.sleep(0.005)


async def held(max_queue: int) -> tuple[Batcher, threading.Event, asyncio.Future]:
    """A batcher of one-image batches whose model holds a first request (id 1) until the gate is set."""
    gate = threading.Event()
    b = Batcher(fake_model([], gate), max_batch=1, max_wait_s=0, max_queue=max_queue)
    b.start()
    first = asyncio.ensure_future(b.submit(images(1), 5))
    await taken(b)
    return b, gate, first


def test_concurrent_requests_share_a_call_and_get_their_own_rows():
    async def main():
        calls: list[int] = []
        b = Batcher(fake_model(calls), max_batch=32, max_wait_s=0.05, max_queue=100)
        b.start()
        outs = [r.out for r in await asyncio.gather(*(b.submit(images(i, i + 0.5), 5) for i in range(8)))]
        await b.stop()
        return calls, outs

    calls, outs = asyncio.run(main())
    assert sum(calls) == 16 and len(calls) < 8
    for i, o in enumerate(outs):
        assert o["id"].tolist() == [i, i + 0.5]


def test_a_batch_fetches_what_any_of_its_requests_asked_for_and_each_gets_its_own_rows():
    """Three requests wait behind a held batch, then run as one: one wants `coupling`, one `primary`, one neither. The
    model is asked for both, once, and each request gets its own rows of every output."""
    gate, asked = threading.Event(), []

    def run(x, busy=False, explain=None, fetch=frozenset()):
        gate.wait(5)
        asked.append((len(x), fetch))
        ids = x.reshape(len(x), -1)[:, 0].copy()
        return {"id": ids, **{name: ids * 10 for name in fetch}}

    async def main():
        b = Batcher(run, max_batch=8, max_wait_s=0, max_queue=10)
        b.start()
        first = asyncio.ensure_future(b.submit(images(0), 5))
        await taken(b)  # the first batch is in the model, held by the gate
        wants = [frozenset({"coupling"}), frozenset({"primary"}), frozenset()]
        waiting = [asyncio.ensure_future(b.submit(images(k + 1, k + 1.5), 5, fetch=f)) for k, f in enumerate(wants)]
        await asyncio.sleep(0.05)
        gate.set()
        outs = [r.out for r in await asyncio.gather(first, *waiting)]
        await b.stop()
        return outs

    outs = asyncio.run(main())
    assert asked == [(1, frozenset()), (6, frozenset({"coupling", "primary"}))]
    for k, o in enumerate(outs[1:]):
        assert o["id"].tolist() == [k + 1, k + 1.5] and o["coupling"].tolist() == [10 * (k + 1), 10 * (k + 1.5)]


def test_requests_are_kept_whole_across_batches():
    async def main():
        calls: list[int] = []
        b = Batcher(fake_model(calls), max_batch=4, max_wait_s=0.02, max_queue=100)
        b.start()
        outs = [r.out for r in await asyncio.gather(*(b.submit(images(*range(3)), 5) for _ in range(3)))]
        await b.stop()
        return calls, outs

    calls, outs = asyncio.run(main())
    assert calls == [3, 3, 3] and all(o["id"].tolist() == [0, 1, 2] for o in outs)


def test_full_queue_is_refused_at_once():
    async def main():
        b, gate, first = await held(max_queue=2)  # the model holds the first image; two more fill the queue
        queued = [asyncio.ensure_future(b.submit(images(2), 5)), asyncio.ensure_future(b.submit(images(3), 5))]
        await asyncio.sleep(0.01)
        with pytest.raises(Overloaded, match="queue full"):
            await b.submit(images(4), 5)
        gate.set()
        await asyncio.gather(first, *queued)
        await b.stop()

    asyncio.run(main())


def test_a_request_larger_than_the_queue_is_too_large_not_overload():
    """Overload says "retry"; a request more images than the queue holds would never fit, so it says how many fit."""

    async def main():
        b = Batcher(fake_model([]), max_batch=4, max_wait_s=0, max_queue=8)
        b.start()
        with pytest.raises(TooLarge, match=r"^9 images in one request, more than the model's queue holds \(8, CAPSNET_MAX_QUEUE\)"):
            await b.submit(images(*range(9)), 5)
        assert (await b.submit(images(*range(8)), 5)).out["id"].tolist() == list(range(8))
        await b.stop()

    asyncio.run(main())


def test_waiting_too_long_is_overload_not_a_hang():
    async def main():
        gate = threading.Event()
        b = Batcher(fake_model([], gate), max_batch=1, max_wait_s=0, max_queue=10)
        b.start()
        with pytest.raises(Overloaded, match="no model slot"):
            await b.submit(images(1), 0.1)
        gate.set()
        await b.stop()

    asyncio.run(main())


def test_a_failing_batch_fails_its_requests_and_the_loop_goes_on():
    async def main():
        n = {"calls": 0}

        def flaky(x, busy=False, explain=None, fetch=frozenset()):
            n["calls"] += 1
            if n["calls"] == 1:
                raise RuntimeError("boom")
            return {"id": x[:, 0, 0, 0]}

        b = Batcher(flaky, max_batch=8, max_wait_s=0, max_queue=10)
        b.start()
        with pytest.raises(InferenceFailed):
            await b.submit(images(1), 5)
        ok = await b.submit(images(7), 5)
        await b.stop()
        return ok

    assert asyncio.run(main()).out["id"].tolist() == [7]


def test_a_lone_request_runs_alone_and_one_among_others_runs_busy():
    """`busy` picks the session with fewer threads: only when other requests are in flight."""

    async def main():
        seen: list[bool] = []

        def run(x, busy=False, explain=None, fetch=frozenset()):
            seen.append(busy)
            return {"id": x[:, 0, 0, 0]}

        working = 1
        b = Batcher(run, max_batch=8, max_wait_s=0, max_queue=10, working=lambda: working)
        b.start()
        await b.submit(images(1), 5)
        working = 2  # a second request is being served while this one runs
        await b.submit(images(2), 5)
        await b.stop()
        return seen

    assert asyncio.run(main()) == [False, True]


def test_several_workers_run_batches_at_the_same_time():
    async def main():
        both_inside = threading.Barrier(2, timeout=5)

        def run(x, busy=False, explain=None, fetch=frozenset()):
            both_inside.wait()  # raises BrokenBarrierError unless two batches are in the model at once
            return {"id": x[:, 0, 0, 0], "busy": np.array([busy] * len(x))}

        b = Batcher(run, max_batch=1, max_wait_s=0, max_queue=10, workers=2)
        b.start()
        outs = [r.out for r in await asyncio.gather(b.submit(images(1), 5), b.submit(images(2), 5))]
        await b.stop()
        return outs

    outs = asyncio.run(main())
    assert [o["id"].tolist() for o in outs] == [[1], [2]]
    assert any(o["busy"].all() for o in outs)  # the second batch started while the first ran


def test_requests_still_queued_at_stop_get_overloaded_not_a_hang():
    async def main():
        b, gate, running = await held(max_queue=10)
        queued = asyncio.ensure_future(b.submit(images(2), 5))
        await asyncio.sleep(0.01)
        stopping = asyncio.ensure_future(b.stop())
        await asyncio.sleep(0.05)
        gate.set()
        await stopping
        with pytest.raises(Overloaded, match="stopping"):
            await queued
        with pytest.raises(Overloaded, match="stopping"):
            await b.submit(images(3), 5)
        return await running

    assert asyncio.run(main()).out["id"].tolist() == [1]  # the batch in the model finished


def test_a_failure_outside_the_model_fails_its_batch_and_the_thread_goes_on():
    async def main():
        n = {"observed": 0}

        def observe(size, busy):
            n["observed"] += 1
            if n["observed"] == 1:
                raise ValueError("metrics broke")

        b = Batcher(fake_model([]), max_batch=8, max_wait_s=0, max_queue=10, observe=observe)
        b.start()
        with pytest.raises(InferenceFailed, match="metrics broke"):
            await b.submit(images(1), 5)
        ok = await b.submit(images(2), 5)  # not a 10 s timeout: the thread is still there
        await b.stop()
        return ok

    assert asyncio.run(main()).out["id"].tolist() == [2]


def test_each_request_learns_how_long_it_queued_and_how_long_its_batch_ran():
    """What /metrics reports per phase: a request queued behind a batch that held the model 0.2 s waited about that long,
    and each reports its own batch's time in the model."""

    def slow(x: np.ndarray, busy: bool = False, explain: np.ndarray | None = None, fetch: frozenset = frozenset()) -> dict[str, np.ndarray]:
        threading.Event().wait(0.2)
        return {"id": x.reshape(len(x), -1)[:, 0].copy()}

    async def main():
        b = Batcher(slow, max_batch=1, max_wait_s=0, max_queue=10)
        b.start()
        first = asyncio.ensure_future(b.submit(images(1), 5))
        await asyncio.sleep(0.05)  # the first is in the model
        second = await b.submit(images(2), 5)
        await b.stop()
        return await first, second

    first, second = asyncio.run(main())
    # lower bounds only (a sleep lasts at least as long as it says, whatever the machine's load), and an order
    assert first.model_s >= 0.19 and second.model_s >= 0.19
    assert second.queue_s >= 0.1 and first.queue_s < second.queue_s


def test_a_request_given_up_while_queued_leaves_the_queue_at_once_and_never_reaches_the_model():
    """Its client gone (the request's task cancelled): the queue's count drops at once, and the model never runs it."""
    from service.metrics import PROGRESS, Progress

    async def main():
        calls, gate = [], threading.Event()
        b = Batcher(fake_model(calls, gate), max_batch=1, max_wait_s=0, max_queue=4)
        b.start()
        first = asyncio.ensure_future(b.submit(images(1), 5))
        await taken(b)  # the model holds the first request
        progress = Progress()
        PROGRESS.set(progress)  # the request's own, as the middleware gives each request
        waiting = asyncio.ensure_future(b.submit(images(2), 5))
        await asyncio.sleep(0.01)
        queued = b.queued_images
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
        after_cancel = b.queued_images
        gate.set()
        await first
        await asyncio.sleep(0.05)
        await b.stop()
        return queued, after_cancel, calls, progress.phase

    queued, after_cancel, calls, phase = asyncio.run(main())
    assert (queued, after_cancel) == (1, 0)
    assert calls == [1], "the model ran the first request only"
    assert phase != "predict", "dropped from the queue, not from a batch that ran"
