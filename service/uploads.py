"""Uploaded images to network inputs without stalling the event loop.

Decoding cost follows the decoded pixel count, not the file size: a 63 KB PNG can hold 4000x4000 RGBA pixels and
takes seconds to decode and clean up, while every /healthz and every other request waits on the same event loop.
So the header is read on the loop (microseconds, and it is where the pixel limit is enforced), small images are
decoded and preprocessed right there (a thread hop would cost more than the work), and large ones go to a small
pool of threads with a bounded number of places: when they are all taken the request is answered 503 with
Retry-After at once, as a full model queue is. Pillow, OpenCV and numpy release the GIL in their heavy loops, so
the event loop keeps answering while the pool works.
"""
from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

import numpy as np
from PIL import Image

from service.batcher import Overloaded
from service.errors import ClientError
from service.imaging import load_pixels, open_image
from service.preprocess import WORK_SIDE, to_mnist

T = TypeVar("T")


class DecodePool:
    """Threads for heavy decoding, `workers` at once and `waiting` more queued; past that, Overloaded (503)."""

    def __init__(self, workers: int, waiting: int) -> None:
        self.workers, self.places = workers, workers + waiting
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="capsnet-decode")
        self._lock = threading.Lock()
        self._taken = 0  # admitted and not finished: a request whose client left still holds its place until its thread is done

    @property
    def taken(self) -> int:
        return self._taken

    async def run(self, fn: Callable[[], T]) -> T:
        with self._lock:
            if self._taken >= self.places:
                raise Overloaded(f"image decoding is busy ({self._taken} large images in progress or waiting, limit {self.places}); retry shortly")
            self._taken += 1
        fut = self._executor.submit(fn)
        fut.add_done_callback(self._release)
        return await asyncio.wrap_future(fut)

    def _release(self, _: Future) -> None:
        with self._lock:
            self._taken -= 1

    def shutdown(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


def _labelled(i: int, n: int, fn: Callable[[], T]) -> T:
    """Run fn; a client error in one item of several says which item (`image 3: ...`)."""
    try:
        return fn()
    except ClientError as e:
        if n > 1:
            e.detail = f"image {i}: {e.detail}"
        raise


async def to_inputs(blobs: list[bytes], pool: DecodePool, max_pixels: int, inline_pixels: int, size: int, box: int) -> np.ndarray:
    """Encoded images -> float32 [n,1,size,size] as the network wants them (see preprocess.to_mnist)."""
    n = len(blobs)
    opened: list[Image.Image] = [_labelled(i, n, lambda b=b: open_image(b, max_pixels)) for i, b in enumerate(blobs)]

    def work() -> np.ndarray:
        return np.stack([_labelled(i, n, lambda im=im: to_mnist(*load_pixels(im, WORK_SIDE), size, box)) for i, im in enumerate(opened)])[:, None]

    if sum(im.size[0] * im.size[1] for im in opened) <= inline_pixels:
        return work()
    return await pool.run(work)
