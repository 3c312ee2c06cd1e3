"""Request and response bodies, with the examples that /openapi.json shows.

Sizes (16 pose dimensions, 28x28 pixels, 10 digits) are checked against the model card at request
time rather than restated here, so a re-exported model with other sizes needs no code change.
"""
from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

Finite = Annotated[float, Field(allow_inf_nan=False)]
Unit = Annotated[float, Field(allow_inf_nan=False, ge=0.0, le=1.0)]
Digit = Annotated[int, Field(ge=0, le=9, description="digit capsule 0-9", examples=[3])]

EXAMPLE_POSE = [0.02, -0.11, 0.05, 0.21, -0.07, 0.13, 0.0, -0.18, 0.09, 0.04, -0.02, 0.15, -0.12, 0.06, 0.01, -0.09]
ROW = [0.0] * 28
EXAMPLE_PNG = "iVBORw0KGgoAAAANSUhEUgAAABwAAAAcCAAAAABXZoBIAAAAEElEQVR42mNgGAWjYBQQAwADLAAB1wvpfAAAAABJRU5ErkJggg=="  # blank 28x28


class PredictJSON(BaseModel):
    """Exactly one of `image` (base64 or data: URL of PNG/JPEG/GIF/BMP/WebP) or `pixels` (28x28 in [0,1])."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"image": "data:image/png;base64," + EXAMPLE_PNG}, {"pixels": [ROW] * 28}]})

    image: str | None = Field(None, description="base64 or data: URL of an image; preprocessed to look like MNIST")
    pixels: list[list[Unit]] | None = Field(None, description="28x28, 0 background, 1 ink; fed to the network as is")

    @model_validator(mode="after")
    def _one(self) -> "PredictJSON":
        if (self.image is None) == (self.pixels is None):
            raise ValueError("send exactly one of 'image' or 'pixels'")
        return self


class PredictBatchJSON(BaseModel):
    """Exactly one of `images` (list of base64 / data: URLs) or `pixels` (N x 28 x 28)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"images": ["data:image/png;base64," + EXAMPLE_PNG] * 2}]})

    images: list[str] | None = None
    pixels: list[list[list[Unit]]] | None = None

    @model_validator(mode="after")
    def _one(self) -> "PredictBatchJSON":
        if (self.images is None) == (self.pixels is None):
            raise ValueError("send exactly one of 'images' or 'pixels'")
        return self


class Picture(BaseModel):
    png: str = Field(description="base64 of a 28x28 8-bit grey PNG", examples=[EXAMPLE_PNG])
    pixels: list[list[float]] = Field(description="28 rows of 28 values in [0,1]")


class ModelInfo(BaseModel):
    name: str = Field(examples=["capsnet-mnist"])
    version: str = Field(examples=["12ep-1a2b3c4d"])
    provider: str = Field(description="onnxruntime execution provider in use", examples=["CPUExecutionProvider"])
    precision: str = Field(description="fp32 or int8 (the convolutions)", examples=["fp32"])


class Prediction(BaseModel):
    prediction: int = Field(description="the digit whose capsule is longest", examples=[7])
    lengths: list[float] = Field(description="length of each of the 10 digit capsules, in (0,1)")
    poses: list[list[float]] = Field(description="10 digit capsules x 16-D pose vectors v_j")
    reconstruction: Picture = Field(description="the decoder's image from the winning capsule")
    input: Picture = Field(description="the 28x28 image the network saw, after preprocessing")
    model: ModelInfo
    coupling: list[list[float]] | None = Field(None, description="with ?include=coupling: c_ij [1152][10]; primary capsule i = channel*36 + row*6 + col")
    coupling_grid: list[list[list[float]]] | None = Field(None, description="with ?include=coupling: [10][6][6] mean c_ij over the 32 capsule types at each position")

    model_config = ConfigDict(json_schema_extra={"examples": [{
        "prediction": 7, "lengths": [0.01, 0.02, 0.03, 0.02, 0.01, 0.02, 0.01, 0.97, 0.02, 0.05],
        "poses": [EXAMPLE_POSE] * 10, "reconstruction": {"png": EXAMPLE_PNG, "pixels": [ROW] * 28},
        "input": {"png": EXAMPLE_PNG, "pixels": [ROW] * 28},
        "model": {"name": "capsnet-mnist", "version": "12ep-1a2b3c4d", "provider": "CPUExecutionProvider", "precision": "fp32"}}]})


class BatchPrediction(BaseModel):
    results: list[Prediction]


class ReconstructRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"digit": 3, "pose": EXAMPLE_POSE}]})

    digit: Digit
    pose: list[Finite] = Field(description="16 finite numbers: a digit capsule's pose vector")


class Reconstruction(BaseModel):
    reconstruction: Picture


class PerturbRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"digit": 3, "pose": EXAMPLE_POSE, "deltas": [-0.25, -0.2, -0.15, -0.1, -0.05, 0.0, 0.05, 0.1, 0.15, 0.2, 0.25]}]})

    digit: Digit
    pose: list[Finite]
    deltas: list[Finite] | None = Field(None, description="added to each dimension in turn; default -0.25..0.25 step 0.05")


class Grid(BaseModel):
    png: str = Field(description="base64 PNG: 16 rows (dimensions) x len(deltas) columns of 28x28 tiles, no gaps")
    rows: int = Field(examples=[16])
    cols: int = Field(examples=[11])
    tile: int = Field(examples=[28])


class Perturbation(BaseModel):
    digit: int
    deltas: list[float]
    grid: Grid

    model_config = ConfigDict(json_schema_extra={"examples": [{"digit": 3, "deltas": [-0.25, 0.0, 0.25], "grid": {"png": EXAMPLE_PNG, "rows": 16, "cols": 3, "tile": 28}}]})


class ErrorBody(BaseModel):
    error: str = Field(examples=["invalid"])
    detail: str = Field(examples=["pose: List should have at least 16 items after validation, not 3"])


class Health(BaseModel):
    status: str = Field(examples=["ok"])


class Ready(BaseModel):
    status: str = Field(examples=["ready"])
    provider: str | None = Field(None, examples=["CPUExecutionProvider"])
    device: str | None = Field(None, examples=["CPU"])


ERRORS = {
    400: {"model": ErrorBody, "description": "undecodable image, base64 or JSON"},
    413: {"model": ErrorBody, "description": "body or image over the limits"},
    415: {"model": ErrorBody, "description": "media type not accepted"},
    422: {"model": ErrorBody, "description": "wrong shape, non-finite or out-of-range values"},
    503: {"model": ErrorBody, "description": "model queue full or not ready; see Retry-After"},
}
