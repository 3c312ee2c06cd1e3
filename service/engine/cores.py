"""How the batcher's threads and the event loop share a small machine's cores: the one place for that tuning.

Three choices, each kept because a benchmark showed it on more than one machine (figures: BENCHMARKS.md, "Reading
these figures" and "What was tried"):
- a batch run while other requests are in flight uses a second session with fewer threads (CAPSNET_INTRA_OP_THREADS_BUSY,
  made by engine.load_engine), so the event loop keeps a core; a lone request still gets every core;
- how many batches run at once (CAPSNET_WORKERS=0) follows the warm-up's timing of that session: enough to keep level
  with one event loop, a second one only where it pays for what it costs beside the loop (`batches_in_flight`);
- with a remote engine, two batches on the wire: one travels while the engine runs the other.
The batcher decides per batch whether the service is busy (service/engine/batcher.py); this module decides how many threads.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the engines import this module for its figures
    from service.engine.protocol import InferenceEngine

# CPU that one /predict costs the event loop under load (HTTP, multipart, decoding, preprocessing, JSON): 0.6-1.4 ms
# measured on the benchmark machines
EVENT_LOOP_MS_PER_REQUEST = 1.0
# CPU that each request loses once a second batch thread runs beside the loop and the first: preemption, and the GIL
# handed between three threads on two cores (INT8, 16 clients: 3.0 ms a request with one batch at a time, 3.6-3.8 with two)
BATCH_BESIDE_MS_PER_REQUEST = 0.5
REMOTE_WORKERS = 2  # batcher threads (each with its own connection) to a remote engine


def available_cores(cgroup_root: Path = Path("/sys/fs/cgroup"), self_cgroup: Path = Path("/proc/self/cgroup")) -> int:
    """The CPUs this process may use: its affinity (a cpuset), and no more than its cgroup's CPU quota, rounded down, at
    least one. A quota (`docker run --cpus=1`, a Kubernetes CPU limit) leaves the affinity at every core of the host, and
    a worker process or a batch thread per core there would share one core's time."""
    cores = len(os.sched_getaffinity(0))
    quota = _cpu_quota(cgroup_root, self_cgroup)
    return cores if quota is None else max(1, min(cores, int(quota)))


def _cpu_quota(root: Path, self_cgroup: Path) -> float | None:
    """CPUs a second the cgroup grants (cgroup v2 `cpu.max`, else v1 `cpu.cfs_quota_us` over `cpu.cfs_period_us`); None
    without a limit or a readable cgroup. v2: the process's own group (from /proc/self/cgroup), else the root's, which is
    the container's own in a container's cgroup namespace."""
    try:
        own = next((line.split("::", 1)[1].strip() for line in self_cgroup.read_text().splitlines() if line.startswith("0::")), "/")
    except OSError:
        own = "/"
    for group in dict.fromkeys((root / own.lstrip("/"), root)):
        try:
            quota, period = (group / "cpu.max").read_text().split()[:2]
        except (OSError, ValueError):
            continue
        return None if quota == "max" else int(quota) / int(period)
    try:
        quota_us = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period_us = int((root / "cpu" / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return None if quota_us <= 0 or period_us <= 0 else quota_us / period_us


def batches_in_flight(ms_per_image: float | None, cores: int) -> int:
    """How many single-thread batches to run at once so that the model keeps pace with one event loop: one for each
    request's worth of loop CPU and of what another batch thread costs beside it. Measured on 2 cores (BENCHMARKS.md's
    notes): the INT8 file at 1.9 ms an image ran 390-417 requests/s at 16 clients with two batches at once against 504-516
    with one; the FP32 file at 3.4 ms, 333 against 279."""
    if ms_per_image is None:
        return 1
    return max(1, min(cores, round(ms_per_image / (EVENT_LOOP_MS_PER_REQUEST + BATCH_BESIDE_MS_PER_REQUEST))))


def workers(setting: int, engine: InferenceEngine, ms_per_image: float | None) -> int:
    """Batcher threads: CAPSNET_WORKERS when set, else what the engine says (from batches_in_flight, or REMOTE_WORKERS)."""
    return setting or engine.batch_workers(ms_per_image)
