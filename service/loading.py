"""A version of the weights, loaded: at start-up, and again without downtime (SIGHUP, or the Open Inference Protocol's
model repository extension: service/oip/registry.py).

A reload builds the new version whole beside the one serving: the card read again, every file it lists checked against
its sha256, the sessions opened and warmed, a batcher of their own started. Only then is it swapped in, in one
assignment (AppState.models): a request pins the version it began on (AppState.pinned), so its answer comes whole from
one version or the other, never a mix. The old version's batcher goes on for CAPSNET_REQUEST_TIMEOUT_S, the longest a
request that pinned it can still send it work, then drains and stops. A load that fails (a file that is not the card's,
a card that does not parse, a graph that does not open) leaves the serving version as it was, and says why.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from contextlib import suppress
from functools import partial
from typing import Any

import anyio
from anyio import to_thread

from model import ATLAS_FILES
from service.atlas import load_atlas
from service.engine import cores
from service.engine.batcher import Batcher
from service.engine.card import ModelCard, WeightsError, load_card, verify_files
from service.engine.decoder_files import decoder_files
from service.engine.local import load_engine
from service.engine.protocol import InferenceEngine
from service.engine.remote import connect_engine
from service.engine.routing_inspector import load_routing_inspector
from service.engine.two_digit import MAX_AT_ONCE, PairEngine, load_pairs
from service.engine.two_digit import NAME as PAIRS
from service.errors import EngineUnavailable
from service.state import AppState, Models

log = logging.getLogger("capsnet.loading")

LOAD_ERRORS = (WeightsError, ValueError, EngineUnavailable, OSError)  # a version that cannot be served, and why


class LoadFailed(Exception):
    """A version that could not be loaded; the one serving goes on."""


async def build(state: AppState, card: ModelCard) -> tuple[Models, float | None]:
    """The engine (onnxruntime here, or a remote server), the routing trace, the two-digit network, the warm-up and a
    batcher: one version, ready to swap in; with the warm-up's milliseconds an image."""
    s = state.settings
    # a stop while loading (SIGTERM to a pod still starting) does not wait for the step in hand: its thread is left to end
    run = partial(to_thread.run_sync, abandon_on_cancel=True)
    if s.engine_url:
        # the models run elsewhere: only the card (sizes, is_digit rule, version) is read here, and checked against
        # the engine's metadata; the ONNX files need not be on this machine
        engine: InferenceEngine = await run(connect_engine, s.engine_url, card, s.engine_timeout_s, s.engine_start_timeout_s)
    else:
        # every file the card lists, not only those in use: a weights directory that differs from its card is not served
        await run(verify_files, s.weights_dir, card, sorted(card.files))
        engine = await run(load_engine, s.weights_dir, card, s.providers, s.intra_op_threads, s.precision, s.intra_op_threads_busy)
    routing_inspector = await run(load_routing_inspector, s.weights_dir, card)
    pairs: PairEngine | None = None
    if not s.engine_url:  # with a remote engine the two-digit model is not served (the engine serves MNIST's graphs)
        pairs = await run(load_pairs, s.weights_dir, card, engine.session_providers, s.intra_op_threads, anyio.CapacityLimiter(MAX_AT_ONCE))
    ms_per_image = await run(engine.warm_up, s.warmup_runs)
    files = await run(decoder_files, s.weights_dir, card, pairs.card if pairs else None)
    batcher = Batcher(
        engine.predict,
        s.max_batch,
        s.max_wait_ms / 1000.0,
        s.max_queue,
        state.metrics.observe_batch,
        cores.workers(s.workers, engine, ms_per_image),
        working=lambda: state.metrics.working,
    )
    versions = {"capsnet": card.version, **({PAIRS: pairs.card.version} if pairs is not None else {})}
    atlases = {name: await run(load_atlas, s.weights_dir / ATLAS_FILES[name], version) for name, version in versions.items()}
    return Models(engine, batcher, routing_inspector, pairs, files, {k: v for k, v in atlases.items() if v is not None}), ms_per_image


async def reload(state: AppState) -> str:
    """Load the weights directory again and swap the new version in; returns its version. One reload at a time: a
    second asked for meanwhile waits, then loads what the directory holds by then."""
    async with state.reloading:
        old = state.models
        try:
            card = await to_thread.run_sync(load_card, state.settings.weights_dir)
            new, _ = await build(state, card)
        except LOAD_ERRORS as e:
            log.error("reload failed, %s goes on serving: %s", old.engine.card.version if old else "nothing", e)
            raise LoadFailed(str(e)) from e
        new.batcher.start()
        state.models = new
        log.info("reloaded: %s %s now serves (was %s)", card.name, card.version, old.engine.card.version if old else "nothing")
        if old is not None:
            _in_background(state, _retire(old, state.settings.request_timeout_s))
        return card.version


async def _retire(old: Models, grace_s: float) -> None:
    """The old version's batcher outlives the swap by the longest a request that pinned it may still run."""
    try:
        await asyncio.sleep(grace_s)
    finally:
        with suppress(Exception):
            await old.batcher.stop()
        log.info("%s retired", old.engine.card.version)


def _in_background(state: AppState, work: Coroutine[Any, Any, None]) -> None:
    """`work` as a task the state holds until it ends (a task nobody holds may be collected mid-way)."""
    task = asyncio.get_running_loop().create_task(work)
    state.background.add(task)
    task.add_done_callback(state.background.discard)


async def stop_background(state: AppState) -> None:
    """At shutdown: a reload under way and the versions still draining stop now (their requests were drained with the
    rest)."""
    for task in list(state.background):
        task.cancel()
        with suppress(asyncio.CancelledError):
            await task


def on_hangup(state: AppState) -> None:
    """SIGHUP: reload in the background, logged either way (a signal has no one to answer)."""

    async def go() -> None:
        # a load through another worker is passed on as SIGHUP: read which before loading, say when done (group.py)
        generation = state.group.generation() if state.group is not None else 0
        failure = ""
        try:
            await reload(state)
        except LoadFailed as e:  # logged by reload
            failure = str(e)
        if state.group is not None:  # a load through another worker may also have served an unloaded model again
            state.unloaded = state.group.unloaded()
            state.group.acknowledge(generation, failure)

    _in_background(state, go())
