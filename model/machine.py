"""The CPU a figure was measured on (or the device an epoch trained on), and how long a call takes on it: for the model
commands and the benchmarks alike."""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


def device_name(device: torch.device) -> str:
    """What trained an epoch, for its history entry: the GPU's name, or the CPU's model and core count."""
    if device.type == "cuda":
        import torch  # only here: the benchmarks import this module without torch

        return torch.cuda.get_device_name(device)
    return f"{cpu_model()}, {os.cpu_count()} cores"


def cpu_model() -> str:
    """The model name from /proc/cpuinfo (Linux), else what the platform module knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def timed(run: Callable[[], object], min_seconds: float, warmup: int = 3, min_calls: int = 5) -> tuple[float, float]:
    """(median seconds per call, calls per second) of `run` over at least `min_seconds` and `min_calls`, after `warmup`
    calls: the one timing loop of the model commands and the benchmarks."""
    for _ in range(warmup):
        run()
    times: list[float] = []
    t_end = time.perf_counter() + min_seconds
    while time.perf_counter() < t_end or len(times) < min_calls:
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), len(times) / sum(times)
