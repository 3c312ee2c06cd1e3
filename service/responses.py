"""JSON responses serialised by orjson straight from numpy: a prediction carries ~1,900 numbers."""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
from fastapi.responses import JSONResponse

from service.imaging import encode_png

DECIMALS = 5


class FastJSON(JSONResponse):
    def render(self, content: Any) -> bytes:
        return orjson.dumps(content, option=orjson.OPT_SERIALIZE_NUMPY)


def picture(pixels: np.ndarray) -> dict[str, Any]:
    """[H,W] in [0,1] -> {"png": base64, "pixels": rows} as the API returns images."""
    p = np.clip(pixels.astype(np.float32), 0.0, 1.0)
    return {"png": encode_png(p), "pixels": np.round(p, DECIMALS)}


def rounded(x: np.ndarray) -> np.ndarray:
    return np.round(x.astype(np.float32), DECIMALS)
