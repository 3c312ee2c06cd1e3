"""Uploaded images to network inputs without stalling the event loop. Decoding cost follows the decoded pixel count, not
the file size: a 63 KB PNG can hold 4000x4000 RGBA pixels and takes seconds to decode and clean up, while every
/healthz and every other request waits on the same event loop. So the header is read on the loop (microseconds, and it
is where the pixel limit is enforced), small images are decoded and preprocessed right there (a thread hop would cost
more than the work), and larger ones go to a small pool of threads that holds a bounded number of pixels
(service/threads.BoundedPool): when it is full the request is answered 503 with Retry-After at once, as a full model
queue is. Pillow, OpenCV and numpy release the GIL in their heavy loops, so the event loop keeps answering while the
pool works; libspng, which decodes the small RGBA PNGs that canvases export, does not, hence its bound
(images.SPNG_MAX_PIXELS).
"""

from __future__ import annotations

import numpy as np
from PIL import Image

from service.errors import BadInput, for_item
from service.inputs.images import canvas_rgba8, decode, load_alpha, open_image, pixel_values, rgba8
from service.inputs.preprocess import WORK_SIDE, drawing_to_mnist, is_drawing, picture_to_mnist, to_mnist
from service.threads import Pool


def _to_input(data: bytes, im: Image.Image, size: int, box: int, digit_box: int | None) -> np.ndarray:
    """A picture with an alpha channel is told to be a drawing or not once, from its 8-bit values as decoded: a
    drawing's colour channels never become floats, and any other picture's floats come from the same array."""
    rgba = canvas_rgba8(data, im, WORK_SIDE)
    if rgba is None:
        im = decode(im, WORK_SIDE)
        rgba = rgba8(im)
        if rgba is None:
            return to_mnist(*pixel_values(im), size, box, digit_box)
    alpha8 = np.ascontiguousarray(rgba[..., 3])  # read whole twice or more: a strided view costs each pass 3x
    if is_drawing(rgba[..., :3], alpha8):
        return drawing_to_mnist(alpha8, size, box, digit_box)
    alpha = np.divide(alpha8, np.float32(255.0), dtype=np.float32)
    return picture_to_mnist(np.divide(rgba[..., :3], np.float32(255.0), dtype=np.float32), alpha, size, box, digit_box)


def _drawing_to_input(data: bytes, im: Image.Image, size: int, box: int, digit_box: int | None) -> np.ndarray:
    rgba = canvas_rgba8(data, im, WORK_SIDE)
    alpha = load_alpha(im, WORK_SIDE) if rgba is None else np.ascontiguousarray(rgba[..., 3])
    if alpha is None:
        raise BadInput(f"source 'canvas' needs an image with an alpha channel (the ink on a transparent ground); this {im.format} has none")
    return drawing_to_mnist(alpha, size, box, digit_box)


async def to_inputs(
    blobs: list[bytes],
    pool: Pool,
    max_pixels: int,
    inline_pixels: int,
    size: int,
    box: int,
    drawn: bool = False,
    digit_box: int | None = None,
) -> np.ndarray:
    """Encoded images -> float32 [n,1,size,size] as the network wants them (see preprocess.to_mnist; `drawn`: canvas
    drawings, preprocess.drawing_to_mnist; `digit_box`: each a pair of digits, preprocess.fit_pair)."""
    n = len(blobs)
    opened: list[Image.Image] = [for_item(i, n, open_image, b, max_pixels) for i, b in enumerate(blobs)]
    convert = _drawing_to_input if drawn else _to_input

    def work() -> np.ndarray:
        return np.stack([for_item(i, n, convert, blobs[i], im, size, box, digit_box) for i, im in enumerate(opened)])[:, None]

    pixels = sum(im.size[0] * im.size[1] for im in opened)
    return work() if pixels <= inline_pixels else await pool.run(work, pixels)
