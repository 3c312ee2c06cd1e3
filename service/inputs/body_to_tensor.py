"""The one path from a request body to the network's input, float32 [n,1,S,S], for every route that takes images:
multipart `file` parts and JSON base64 images are decoded and preprocessed (service.inputs.uploads), JSON `pixels` go
in as they are. The side S and the ink's box are the caller's network's: 28 and 20 for MNIST, 36 and the card's pair box
for two overlapping digits."""

from __future__ import annotations

from typing import Any

import numpy as np

from service.errors import Invalid, for_item
from service.http.body import Body
from service.inputs.images import decode_base64
from service.inputs.multipart import file_parts
from service.inputs.uploads import to_inputs
from service.schemas import PredictBatchJSON, PredictJSON
from service.settings import Settings
from service.threads import BoundedPool, off_loop


def pixel_rows(nested: Any, size: int) -> np.ndarray:
    """Nested lists -> float32 [S,S]; ragged or mis-sized input is a 422 naming the shape expected."""
    try:
        arr = np.array(nested, dtype=np.float32)
    except ValueError:
        arr = None
    if arr is None or arr.ndim != 2 or arr.shape != (size, size):
        got = "ragged rows" if arr is None else f"shape {list(arr.shape)}"
        raise Invalid(f"pixels must be {size} rows of {size} numbers each, got {got}")
    return arr


async def body_to_tensor(
    body: Body,
    document: PredictJSON | PredictBatchJSON | None,
    s: Settings,
    pool: BoundedPool,
    size: int,
    box: int,
    limit: int = 1,
    digit_box: int | None = None,
) -> np.ndarray:
    """`document`: the JSON body as validated by the route (None for multipart); `limit`: the most images it may hold;
    `pool`: where decoding and parsing too large for the event loop go; `digit_box`: the images hold two digits, each
    of them fit to this box when they were written apart (service.inputs.preprocess.fit_pair)."""
    drawn = False
    if document is None:
        files = await off_loop(pool, s.inline_parse_bytes, lambda data: file_parts(data, body.content_type, "file", limit), body.data)
        return await to_inputs(files, pool, s.max_image_pixels, s.inline_decode_pixels, size, box, digit_box=digit_box)
    if isinstance(document, PredictJSON):
        images = None if document.image is None else [document.image]
        pixels = None if document.pixels is None else [document.pixels]
        drawn = document.source == "canvas"
    else:
        images, pixels = document.images, document.pixels
    items: list = images if images is not None else pixels or []
    n = len(items)
    if not n:
        raise Invalid("the batch is empty")
    if n > limit:
        raise Invalid(f"{n} images, at most {limit} per request")
    if pixels is not None:
        return np.stack([for_item(i, n, pixel_rows, p, size) for i, p in enumerate(pixels)])[:, None]
    blobs = [for_item(i, n, decode_base64, b64, s.max_body_bytes) for i, b64 in enumerate(items)]
    return await to_inputs(blobs, pool, s.max_image_pixels, s.inline_decode_pixels, size, box, drawn, digit_box)
