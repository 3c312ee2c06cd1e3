"""JSON responses serialised by orjson straight from numpy: a prediction carries ~1,900 numbers."""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
from fastapi.responses import JSONResponse

from service.errors import Invalid
from service.imaging import encode_png

DECIMALS = 5


class FastJSON(JSONResponse):
    def render(self, content: Any) -> bytes:
        return orjson.dumps(content, option=orjson.OPT_SERIALIZE_NUMPY)


PIXELS = "pixels"  # the ?include= value that adds each image's values to its PNG
PIXELS_DOC = "`pixels` adds each image's values (rows in [0,1], 5 decimals) beside its PNG"
PIXELS_PARAM = {
    "name": "include",
    "in": "query",
    "required": False,
    "description": PIXELS_DOC,
    "schema": {"anyOf": [{"const": PIXELS}, {"type": "null"}], "title": "Include"},
}


def included(value: str | None, allowed: set[str]) -> set[str]:
    """?include=a,b as a set, every name one of `allowed` (else a 422 naming them)."""
    parts = {p.strip() for p in (value or "").split(",") if p.strip()}
    unknown = parts - allowed
    if unknown:
        raise Invalid(f"include: unknown value(s) {sorted(unknown)}; choose from {sorted(allowed)}")
    return parts


def pixels_asked(include: str | None) -> bool:
    """?include= on a route whose only extra is `pixels` (/probe, /reconstruct, the two-digit /predict)."""
    return PIXELS in included(include, {PIXELS})


def picture(pixels: np.ndarray, with_pixels: bool = False) -> dict[str, Any]:
    """[H,W] in [0,1] -> {"png": base64} as the API returns images, and its rows of values when the caller asks
    (?include=pixels): 784 rounded numbers are 10 KB of JSON that a viewer of the PNG never reads."""
    p = np.clip(pixels.astype(np.float32), 0.0, 1.0)
    out: dict[str, Any] = {"png": encode_png(p)}
    if with_pixels:
        out["pixels"] = np.round(p, DECIMALS)
    return out


def rounded(x: np.ndarray) -> np.ndarray:
    return np.round(x.astype(np.float32), DECIMALS)
