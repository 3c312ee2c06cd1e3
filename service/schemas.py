"""Request and response bodies, with the examples that /openapi.json shows.

Sizes (16 pose dimensions, 28x28 pixels, 10 digits) are checked against the model card at request
time rather than enforced here, so a re-exported model with other sizes needs no code change. Where
a schema states a size or a limit (a pose's 16 numbers within +-10, at most 41 deltas), it documents
the committed model and the settings' defaults; the check at request time is what honours another
card or a changed setting (CAPSNET_MAX_ABS_POSE, CAPSNET_MAX_DELTAS), with its own message.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from service.settings import Settings

POSE_DIM = 16  # the committed model card's digit_dim
MAX_ABS_POSE: float = Settings.model_fields["max_abs_pose"].default
MAX_DELTAS: int = Settings.model_fields["max_deltas"].default


def _json_number(value: object) -> object:
    """A whole number must come as a JSON number: "3" (a string) or true is a 422 naming the field, not read as 3 or 1,
    while 3.0 passes (JSON does not tell 3 from 3.0; Python's json writes floats so)."""
    if isinstance(value, (str, bool)):
        raise ValueError("should be a JSON number, not a " + ("string" if isinstance(value, str) else "boolean"))
    return value


# Floats are strict: a string or a boolean is a 422 naming the field (pydantic's lax mode read "0.5" as 0.5 and true as
# 1), and a whole number is still a number. Strict costs nothing (a 28x28 grid validates in 13 us either way); a check
# of each value in Python would cost 350 us a grid, so only the lone whole numbers (a digit) get one.
PoseValue = Annotated[float, Field(strict=True, allow_inf_nan=False, json_schema_extra={"minimum": -MAX_ABS_POSE, "maximum": MAX_ABS_POSE})]
Pose = Annotated[list[PoseValue], Field(json_schema_extra={"minItems": POSE_DIM, "maxItems": POSE_DIM})]
Deltas = Annotated[list[PoseValue], Field(json_schema_extra={"minItems": 1, "maxItems": MAX_DELTAS})]
Unit = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=0.0, le=1.0)]
Digit = Annotated[int, Field(ge=0, le=9, description="digit capsule 0-9", examples=[3]), BeforeValidator(_json_number)]

EXAMPLE_POSE = [0.02, -0.11, 0.05, 0.21, -0.07, 0.13, 0.0, -0.18, 0.09, 0.04, -0.02, 0.15, -0.12, 0.06, 0.01, -0.09]
# A 7 drawn for the examples (not one of MNIST's), its ink in sixteenths: what a request that works looks like.
SEVEN = (
    "0000000000000000000000000000",
    "0000000000000000000000000000",
    "0000000000000000000000000000",
    "0000000000000000000000000000",
    "0000000ffffffffffffffb000000",
    "0000000fffffffffffffff000000",
    "0000000bbbbbbbbbbaeff9000000",
    "000000000000000001efd1000000",
    "00000000000000000aff50000000",
    "00000000000000004ffc00000000",
    "0000000000000000cff300000000",
    "0000000000000007ff9000000000",
    "000000000000001efe1000000000",
    "00000000000000aff60000000000",
    "00000000000002ffc00000000000",
    "00000000000008ff400000000000",
    "0000000000000dfd000000000000",
    "0000000000004ff8000000000000",
    "0000000000009ff3000000000000",
    "000000000001efc0000000000000",
    "000000000005ff70000000000000",
    "00000000000afe20000000000000",
    "00000000002ffb00000000000000",
    "000000000015c500000000000000",
    "0000000000000000000000000000",
    "0000000000000000000000000000",
    "0000000000000000000000000000",
    "0000000000000000000000000000",
)
EXAMPLE_PIXELS = [[round(int(v, 16) / 15, 3) for v in row] for row in SEVEN]
EXAMPLE_PNG = (  # SEVEN as an 8-bit grey PNG
    "iVBORw0KGgoAAAANSUhEUgAAABwAAAAcCAAAAABXZoBIAAAAiklEQVR42mNgGDjwHwXshggywiRR1UKEWaC8PXDx9y6CDLNwWSD4"
    "7v9dQVySq/7/D8Ul5/L//xmczj7z/78xLrny//9n4nHNO3yuScMlp4TPNR3//7vglLz7/y4ylwnFj0oMq3FqnInHj4Lv0JyDbKyLIB5TV/1/p4THk7tRRZiR2GeVJl1jGGgAADOZP2CwfI9ZAAAAAElFTkSuQmCC"
)


class PredictJSON(BaseModel):
    """Exactly one of `image` (base64 or data: URL of PNG/JPEG/GIF/BMP/WebP) or `pixels` (28x28 in [0,1]; 36x36 with
    ?model=multimnist)."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"image": "data:image/png;base64," + EXAMPLE_PNG}, {"pixels": EXAMPLE_PIXELS}]}
    )

    image: str | None = Field(None, description="base64 or data: URL of an image; preprocessed to look like MNIST")
    pixels: list[list[Unit]] | None = Field(
        None, description="28x28 (36x36 with ?model=multimnist), 0 background, 1 ink; fed to the network as is"
    )
    source: Literal["upload", "canvas"] = Field(
        "upload",
        description="with `image`: `upload` (the default), a photo or scan, searched for the digit; `canvas`, a drawing whose "
        "alpha channel is the ink on a transparent ground (as the page sends its canvas): every stroke is the digit, fit "
        "and centred as MNIST without that search. An image without alpha is refused. An upload that is ink of one colour "
        "on transparency is read as a drawing either way",
    )

    @model_validator(mode="after")
    def _one(self) -> PredictJSON:
        if (self.image is None) == (self.pixels is None):
            raise ValueError("send exactly one of 'image' or 'pixels'")
        if self.source == "canvas" and self.image is None:
            raise ValueError("source 'canvas' describes an 'image'; 'pixels' go to the network as they are")
        return self


class PredictBatchJSON(BaseModel):
    """Exactly one of `images` (list of base64 / data: URLs) or `pixels` (N x 28 x 28)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"images": ["data:image/png;base64," + EXAMPLE_PNG] * 2}]})

    images: list[str] | None = None
    pixels: list[list[list[Unit]]] | None = None

    @model_validator(mode="after")
    def _one(self) -> PredictBatchJSON:
        if (self.images is None) == (self.pixels is None):
            raise ValueError("send exactly one of 'images' or 'pixels'")
        return self


class Picture(BaseModel):
    png: str = Field(description="base64 of an 8-bit grey PNG, 28x28 (36x36 from the two-digit model)", examples=[EXAMPLE_PNG])
    pixels: list[list[float]] | None = Field(None, description="its rows of values in [0,1], with ?include=pixels")


class Transform(BaseModel):
    """An affine transform of the 28x28 input about its centre (model/affine.py): scale, then shear, then rotation, then
    shift."""

    model_config = ConfigDict(extra="forbid", strict=True)  # numbers as JSON numbers (above)

    rotate: float = Field(0.0, ge=-180, le=180, description="degrees, counter-clockwise as seen")
    scale: float = Field(1.0, ge=0.25, le=4.0, description="1 keeps the size")
    shear: float = Field(0.0, ge=-60, le=60, description="degrees; positive leans the top to the right")
    tx: float = Field(0.0, ge=-14, le=14, description="pixels right")
    ty: float = Field(0.0, ge=-14, le=14, description="pixels down")


MAX_TRANSFORMS = 64


class ProbeJSON(PredictJSON):
    """One input (`image` or `pixels`, as /predict takes them) and the transforms to apply to what the network sees."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"pixels": EXAMPLE_PIXELS, "transforms": [{"rotate": -30}, {}, {"rotate": 30}, {"scale": 0.8, "shear": 15}]}]
        },
    )

    transforms: list[Transform] = Field(
        min_length=1, max_length=MAX_TRANSFORMS, description=f"1 to {MAX_TRANSFORMS} transforms; {{}} is the identity"
    )


class ProbeResult(BaseModel):
    transform: Transform
    prediction: int
    lengths: list[float] = Field(description="[10] digit capsule lengths")
    poses: list[list[float]] = Field(description="[10][16] digit capsule poses")
    input: Picture = Field(description="the transformed 28x28 image the network saw (`pixels` on request, as the input's)")


class Probe(BaseModel):
    input: Picture = Field(description="the 28x28 image before any transform (after preprocessing, for `image`)")
    results: list[ProbeResult] = Field(description="one per transform, in the request's order")


class ModelInfo(BaseModel):
    name: str = Field(examples=["capsnet-mnist"])
    version: str = Field(examples=["12ep-1a2b3c4d"])
    provider: str = Field(description="onnxruntime execution provider in use", examples=["CPUExecutionProvider"])
    precision: str = Field(description="fp32 or int8 (the convolutions); unknown where a remote engine does not say", examples=["fp32"])


class RoutingIteration(BaseModel):
    iteration: int = Field(description="1-based; iteration 1 has uniform coupling (b = 0)", ge=1)
    lengths: list[float] = Field(description="[10] digit capsule lengths after this iteration")
    coupling_grid: list[list[list[float]]] = Field(
        description="[10][6][6] coupling c_ij to each digit at each primary-capsule position (mean over the 32 types, or of `capsule_type`)"
    )
    agreement_grid: list[list[list[float]]] = Field(
        description="[10][6][6] agreement u_hat_j|i . v_j, what this iteration adds to the routing logits for the next"
    )
    coupling_range: list[float] = Field(description="[min, max] of coupling_grid", min_length=2, max_length=2)
    agreement_range: list[float] = Field(description="[min, max] of agreement_grid", min_length=2, max_length=2)


class Routing(BaseModel):
    trained: int = Field(description="the routing iterations the model was trained with: the served prediction is that iteration's")
    capsule_type: int | Literal["mean"] = Field(description="the primary capsule type (0-31) the grids show, or the mean over all 32")
    uniform_coupling: float = Field(description="1/10: every coupling coefficient at iteration 1")
    iterations: list[RoutingIteration]


class PairModelInfo(BaseModel):
    name: str = Field(examples=["capsnet-multimnist"])
    version: str = Field(examples=["6ep-1a2b3c4d"])
    provider: str = Field(description="onnxruntime execution provider in use", examples=["CPUExecutionProvider"])


class PairSample(BaseModel):
    pixels: list[list[float]] = Field(description="36 rows of 36 values in [0,1]: two test digits added and clipped")
    labels: list[int] = Field(description="the two digits, first then second", min_length=2, max_length=2)


class PairPrediction(BaseModel):
    """`/predict?model=multimnist`: two overlapping digits, pulled apart by the capsules (the paper's Figure 5)."""

    predictions: list[int] = Field(
        description="the digits found, longest capsule first: two, one when the card's `multimnist.second_digit` rule "
        "reads no second digit (from the capsules' lengths and how much of the input their redrawings explain), none when "
        "the input is blank or holds no digit the network knows (`not_digits`)",
        examples=[[7, 3]],
        max_length=2,
    )
    ranked: list[int] = Field(
        description="the two capsules read as the pair, the longer first: with two digits found, the pair of the three "
        "longest that the card's `multimnist.pair_choice` picks (the two longest without one, as the paper reads them); "
        "otherwise the two longest, whatever their length",
        min_length=2,
        max_length=2,
    )
    lengths: list[float] = Field(description="length of each of the 10 digit capsules, in (0,1)")
    poses: list[list[float]] = Field(description="10 digit capsules x 16-D pose vectors v_j")
    reconstructions: list[Picture] = Field(
        description="[2] 36x36: the decoder on each capsule of `ranked` alone, in its order (overlay them in two colours "
        "for the paper's Figure 5)",
        min_length=2,
        max_length=2,
    )
    input: Picture = Field(description="the 36x36 image the network saw, after preprocessing")
    blank: bool = Field(description="no ink found in the input")
    not_digits: bool = Field(
        description="ink, but none of it read as digits: a letter, a scribble, noise (the card's `multimnist.digits` rule); "
        "`predictions` is then empty, and `ranked` says only which capsules are longest"
    )
    model: PairModelInfo


class WhyNotDigit(BaseModel):
    signals: Literal["blank", "lengths", "redraw", "pose"] = Field(
        description="`blank`: no ink; `lengths`: no capsule is clearly longest; `redraw`: no capsule redraws the input well; "
        "`pose`: the winner's pose is unlike any training digit's"
    )
    reason: str = Field(description="the same in a short phrase, as the page shows it", examples=["no capsule can redraw it"])


class Prediction(BaseModel):
    prediction: int = Field(description="the digit whose capsule is longest", examples=[7])
    lengths: list[float] = Field(description="length of each of the 10 digit capsules, in (0,1)")
    poses: list[list[float]] = Field(description="10 digit capsules x 16-D pose vectors v_j")
    reconstruction: Picture = Field(description="the decoder's image from the winning capsule")
    input: Picture = Field(description="the 28x28 image the network saw, after preprocessing")
    model: ModelInfo
    blank: bool = Field(
        description="no ink found in the input: nothing was drawn, the paper is empty, or nothing in it stands out from its "
        "ground as strokes (grey noise, a bare texture); then is_digit is false"
    )
    is_digit: bool = Field(
        description="the capsules take the input for a digit: their lengths, how well the winner redraws it and the "
        "winner's pose, read together (the rule, and how often it is right on letters, blank paper and real digits, are "
        "in the model card, `is_digit`)"
    )
    why_not_digit: WhyNotDigit | None = Field(
        None, description="when is_digit is false, which of the capsules' signals says so most; null for a digit"
    )
    recon_errors: list[float] = Field(
        description="[10] counterfactual reconstruction error of each digit capsule: the decoder run on "
        "capsule k's own pose, sum of squared differences to the input divided by the input's "
        "sum of squares, floored at 1 (0 is a perfect match, 1 as bad as an empty image)"
    )
    counterfactuals: list[str] | None = Field(
        None, description="with ?include=counterfactuals: [10] base64 28x28 PNGs, the decoder's image from each digit capsule's own pose"
    )
    coupling: list[list[float]] | None = Field(
        None, description="with ?include=coupling: c_ij [1152][10]; primary capsule i = channel*36 + row*6 + col"
    )
    coupling_grid: list[list[list[float]]] | None = Field(
        None, description="with ?include=coupling: [10][6][6] mean c_ij over the 32 capsule types at each position"
    )
    routing: Routing | None = Field(
        None,
        description="with ?include=routing: every iteration of dynamic routing, run past the trained "
        "number (the model card's `routing` section says how many)",
    )

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "prediction": 7,
                    "lengths": [0.01, 0.02, 0.03, 0.02, 0.01, 0.02, 0.01, 0.97, 0.02, 0.05],
                    "poses": [EXAMPLE_POSE] * 10,
                    "blank": False,
                    "is_digit": True,
                    "why_not_digit": None,
                    "recon_errors": [0.81, 0.74, 0.69, 0.72, 0.77, 0.71, 0.83, 0.12, 0.66, 0.58],
                    "reconstruction": {"png": EXAMPLE_PNG, "pixels": EXAMPLE_PIXELS},
                    "input": {"png": EXAMPLE_PNG, "pixels": EXAMPLE_PIXELS},
                    "model": {"name": "capsnet-mnist", "version": "12ep-1a2b3c4d", "provider": "CPUExecutionProvider", "precision": "fp32"},
                }
            ]
        }
    )


class BatchPrediction(BaseModel):
    results: list[Prediction]


class ReconstructRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"digit": 3, "pose": EXAMPLE_POSE}]})

    digit: Digit
    pose: Pose = Field(description=f"{POSE_DIM} finite numbers within +-{MAX_ABS_POSE:g}: a digit capsule's pose vector")


class Reconstruction(BaseModel):
    reconstruction: Picture


class PerturbRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"digit": 3, "pose": EXAMPLE_POSE, "deltas": [-0.25, -0.2, -0.15, -0.1, -0.05, 0.0, 0.05, 0.1, 0.15, 0.2, 0.25]}]
        },
    )

    digit: Digit
    pose: Pose = Field(description=f"{POSE_DIM} finite numbers within +-{MAX_ABS_POSE:g}: the pose to perturb")
    deltas: Deltas | None = Field(
        None,
        description=f"added to each dimension in turn: 1 to {MAX_DELTAS} values within +-{MAX_ABS_POSE:g}; default -0.25..0.25 step 0.05",
    )


class Grid(BaseModel):
    png: str = Field(description="base64 PNG: 16 rows (dimensions) x len(deltas) columns of 28x28 tiles, no gaps")
    rows: int = Field(examples=[16])
    cols: int = Field(examples=[11])
    tile: int = Field(examples=[28])


class Perturbation(BaseModel):
    digit: int
    deltas: list[float]
    grid: Grid

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"digit": 3, "deltas": [-0.25, 0.0, 0.25], "grid": {"png": EXAMPLE_PNG, "rows": 16, "cols": 3, "tile": 28}}]
        }
    )


class FieldError(BaseModel):
    loc: list[str | int] = Field(
        description="where in the request: field names and list indices, after `body` on /reconstruct and /perturb; empty "
        "for a rule over the whole body (exactly one of `image` and `pixels`)",
        examples=[["body", "digit"]],
    )
    msg: str = Field(examples=["Input should be less than or equal to 9"])
    type: str = Field(description="pydantic's error type", examples=["less_than_equal"])


class ErrorBody(BaseModel):
    error: str = Field(
        description="one code per kind of mistake: bad_request, bad_input, bad_json, unauthorized, not_found, "
        "model_not_served, method_not_allowed, request_timeout, too_large, unsupported_media_type, invalid, overloaded, "
        "not_ready, engine_unavailable, inference_failed, internal (http_error for another status the framework raises)",
        examples=["invalid"],
    )
    detail: str = Field(
        description="what to change; an item of a batch is named first (`image 2: ...`)", examples=["pose: 16 numbers expected, got 3"]
    )
    errors: list[FieldError] | None = Field(None, description="with 422 from validation: each field that failed (at most 20)")
    id: str | None = Field(None, description="with 500: quote it when reporting the failure", examples=["3f2a9c1b7d4e"])


class InputSpec(BaseModel):
    name: str = Field(examples=["image"])
    type: str = Field(examples=["tensor(float)"])
    shape: list[int | None] = Field(description="null: any size (the batch)", examples=[[None, 1, 28, 28]])


class Limits(BaseModel):
    max_body_bytes: int
    max_image_pixels: int
    max_batch_items: int
    max_deltas: int
    max_abs_pose: float
    max_json_depth: int
    max_json_values: int
    body_timeout_s: float
    body_min_rate: int
    request_timeout_s: float


class Batching(BaseModel):
    max_batch: int
    max_wait_ms: float
    max_queue: int
    batches_in_flight: int | None = Field(description="batches the model runs at once; null before start-up")
    intra_op_threads: int | str = Field(examples=["one per core"])
    intra_op_threads_under_load: int | str = Field(examples=[1])


class ServedModel(BaseModel):
    """The model card (every field of weights/model-card.json) and how this process serves it."""

    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={
            "examples": [
                {
                    "name": "capsnet-mnist",
                    "version": "12ep-1a2b3c4d",
                    "provider": "CPUExecutionProvider",
                    "device": "CPU",
                    "precision": "int8",
                    "model_file": "capsnet-int8.onnx",
                    "session_providers": ["CPUExecutionProvider"],
                    "available_providers": ["CPUExecutionProvider"],
                    "engine": {"kind": "local", "counterfactuals": "decoder-int8.onnx"},
                    "architecture": {"image_size": 28, "num_classes": 10, "digit_dim": 16, "primary_grid": 6},
                    "files": {"capsnet-int8.onnx": {"sha256": "6bfbc108...27fbfdb1", "bytes": 16893546}},
                    "input_spec": {"name": "image", "type": "tensor(float)", "shape": [None, 1, 28, 28]},
                    "limits": {
                        "max_body_bytes": 16777216,
                        "max_image_pixels": 16777216,
                        "max_batch_items": 64,
                        "max_deltas": MAX_DELTAS,
                        "max_abs_pose": MAX_ABS_POSE,
                        "max_json_depth": 1024,
                        "max_json_values": 131072,
                        "body_timeout_s": 10.0,
                        "body_min_rate": 50000,
                        "request_timeout_s": 10.0,
                    },
                    "batching": {
                        "max_batch": 32,
                        "max_wait_ms": 0.0,
                        "max_queue": 512,
                        "batches_in_flight": 1,
                        "intra_op_threads": "one per core",
                        "intra_op_threads_under_load": 1,
                    },
                }
            ]
        },
    )

    name: str
    version: str
    architecture: dict[str, Any] = Field(description="sizes of every layer: image_size, num_classes, digit_dim, primary_grid, ...")
    files: dict[str, dict[str, Any]] = Field(description="each file of the weights directory with its sha256, checked at start-up")
    provider: str = Field(description="onnxruntime execution provider in use")
    device: str
    precision: str = Field(description="fp32 or int8 (the convolutions); unknown where a remote engine does not say")
    model_file: str = Field(description="the capsnet ONNX file being served")
    session_providers: list[str]
    available_providers: list[str] = Field(description="what this onnxruntime build offers")
    engine: dict[str, Any] = Field(
        description='where the models run: {"kind": "local", "counterfactuals": the decoder file that redraws the capsules that '
        'did not win}, or with CAPSNET_ENGINE_URL {"kind": "remote", "url", "server": the engine\'s GET /v2}'
    )
    input_spec: InputSpec
    limits: Limits
    batching: Batching


class Health(BaseModel):
    status: str = Field(examples=["ok"])


class Ready(BaseModel):
    status: str = Field(
        examples=["ready"],
        description="`ready`; else (503) `loading`, `engine_unavailable` (a remote engine is not ready) or `processes_loading` "
        "(one of several worker processes is not warm yet)",
    )
    provider: str | None = Field(None, examples=["CPUExecutionProvider"])
    device: str | None = Field(None, examples=["CPU"])
    engine: str | None = Field(None, description="the remote engine's URL, with CAPSNET_ENGINE_URL (provider `remote`)")


ERRORS = {
    400: {"model": ErrorBody, "description": "undecodable image or base64; a body that is not JSON (NaN and Infinity included)"},
    408: {"model": ErrorBody, "description": "the body did not arrive in time (CAPSNET_BODY_TIMEOUT_S, CAPSNET_BODY_MIN_RATE)"},
    413: {"model": ErrorBody, "description": "body or image over the limits"},
    415: {"model": ErrorBody, "description": "media type not accepted"},
    422: {"model": ErrorBody, "description": "wrong shape or out-of-range values"},
    503: {"model": ErrorBody, "description": "model queue full or not ready; see Retry-After"},
}
