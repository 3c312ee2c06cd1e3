"""Uploaded images to network inputs without stalling the event loop.

Decoding cost follows the decoded pixel count, not the file size: a 63 KB PNG can hold 4000x4000 RGBA pixels and
takes seconds to decode and clean up, while every /healthz and every other request waits on the same event loop.
So the header is read on the loop (microseconds, and it is where the pixel limit is enforced), small images are
decoded and preprocessed right there (a thread hop would cost more than the work), and larger ones go to a small
pool of threads that holds a bounded number of pixels: when it is full the request is answered 503 with Retry-After
at once, as a full model queue is. Pillow, OpenCV and numpy release the GIL in their heavy loops, so
the event loop keeps answering while the pool works.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import numpy as np
from PIL import Image

from service.errors import BadInput, Overloaded, for_item
from service.inputs.images import load_pixels, open_image
from service.inputs.preprocess import WORK_SIDE, drawing_to_mnist, to_mnist

T = TypeVar("T")


class DecodePool:
    """`workers` threads for decoding; what they hold, running or waiting, is bounded in decoded pixels (a canvas is
    78k, the largest legal upload 16M), so many small uploads fit where a few huge ones fill it: past the bound,
    Overloaded (503 with Retry-After). An upload alone is always admitted, whatever its size."""

    def __init__(self, workers: int, max_pixels: int) -> None:
        self.workers, self.max_pixels = workers, max_pixels
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="capsnet-decode")
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


def _to_input(im: Image.Image, size: int, box: int) -> np.ndarray:
    return to_mnist(*load_pixels(im, WORK_SIDE), size, box)


def _drawing_to_input(im: Image.Image, size: int, box: int) -> np.ndarray:
    _, alpha = load_pixels(im, WORK_SIDE)
    if alpha is None:
        raise BadInput(f"source 'canvas' needs an image with an alpha channel (the ink on a transparent ground); this {im.format} has none")
    return drawing_to_mnist(alpha, size, box)


async def to_inputs(
    blobs: list[bytes], pool: DecodePool, max_pixels: int, inline_pixels: int, size: int, box: int, drawn: bool = False
) -> np.ndarray:
    """Encoded images -> float32 [n,1,size,size] as the network wants them (see preprocess.to_mnist; `drawn`: canvas
    drawings, preprocess.drawing_to_mnist)."""
    n = len(blobs)
    opened: list[Image.Image] = [for_item(i, n, open_image, b, max_pixels) for i, b in enumerate(blobs)]
    convert = _drawing_to_input if drawn else _to_input

    def work() -> np.ndarray:
        return np.stack([for_item(i, n, convert, im, size, box) for i, im in enumerate(opened)])[:, None]

    pixels = sum(im.size[0] * im.size[1] for im in opened)
    return work() if pixels <= inline_pixels else await pool.run(work, pixels)
