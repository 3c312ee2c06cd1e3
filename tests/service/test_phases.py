"""Every route that runs a model goes through one driver (service/phases.py): preprocess, the model, postprocess, each
timed once on one clock, observed under the route's endpoint on /metrics, and followed by the request's Progress."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from service.engine.batcher import Inference
from service.metrics import PROGRESS, Metrics, Progress
from service.phases import run_phases


def observed(metrics: Metrics, phase: str, endpoint: str) -> tuple[float, float]:
    """(count, sum) of a phase's histogram for an endpoint."""
    samples = {s.name: s.value for m in metrics.phases[phase].collect() for s in m.samples if s.labels.get("endpoint") == endpoint}
    return samples[f"capsnet_request_{phase}_seconds_count"], samples[f"capsnet_request_{phase}_seconds_sum"]


def test_each_phase_is_timed_once_and_observed_under_the_endpoint() -> None:
    metrics, seen = Metrics(), []

    async def preprocess() -> np.ndarray:
        seen.append(PROGRESS.get().phase)
        await asyncio.sleep(0.02)
        return np.ones(3)

    async def model(x: np.ndarray) -> Inference:
        seen.append(PROGRESS.get().phase)
        await asyncio.sleep(0.03)
        return Inference({"y": 2 * x}, queue_s=0.01, model_s=0.02)

    async def postprocess(x: np.ndarray, inference: Inference) -> float:
        seen.append(PROGRESS.get().phase)
        await asyncio.sleep(0.01)
        return float(inference.out["y"].sum())

    async def main():
        PROGRESS.set(Progress())
        return await run_phases(metrics, "/x", preprocess(), model, postprocess, carried_s=0.5)

    timed = asyncio.run(main())
    assert timed.result == 6.0
    assert seen == ["preprocess", "queue", "postprocess"], "the request's Progress follows its phases"
    assert timed.preprocess_s >= 0.52 and timed.model_wall_s >= 0.03 and timed.postprocess_s >= 0.01
    assert observed(metrics, "preprocess", "/x") == (1.0, pytest.approx(timed.preprocess_s))
    assert observed(metrics, "queue", "/x") == (1.0, pytest.approx(0.01))
    assert observed(metrics, "predict", "/x") == (1.0, pytest.approx(0.02))
    assert observed(metrics, "postprocess", "/x") == (1.0, pytest.approx(timed.postprocess_s))


def test_a_failed_phase_observes_nothing_after_it() -> None:
    metrics = Metrics()

    async def preprocess() -> int:
        return 1

    async def model(x: int) -> Inference:
        raise RuntimeError("the model fell over")

    async def postprocess(x: int, inference: Inference) -> int:
        raise AssertionError("not reached")

    with pytest.raises(RuntimeError, match="fell over"):
        asyncio.run(run_phases(metrics, "/x", preprocess(), model, postprocess))
    assert observed(metrics, "preprocess", "/x")[0] == 1.0
    with pytest.raises(KeyError):
        observed(metrics, "predict", "/x")
