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
