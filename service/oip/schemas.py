"""The Open Inference Protocol's bodies (KServe v2 / Triton) as /openapi.json documents them for service/routers/oip.py:
apart from the service's own (service/schemas.py), as the protocol is apart from the routes. The protocol's requests
are parsed by its codec (service/oip/codec.py), these document them."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from service.schemas import EXAMPLE_POSE, POSE_DIM


class OIPErrorBody(BaseModel):
    """The protocol's own error body, not ErrorBody: what tritonclient and KServe's clients read on /v2."""

    error: str = Field(examples=["Request for unknown model: 'capsnet2' is not found"])


class ServerLive(BaseModel):
    live: bool = Field(examples=[True])


class ServerReady(BaseModel):
    ready: bool = Field(examples=[True])


class ModelReady(BaseModel):
    name: str = Field(examples=["capsnet"])
    ready: bool = Field(examples=[True])


class RepositoryIndexRequest(BaseModel):
    """The model repository extension's index request; `repository_name` is accepted and ignored (one repository)."""

    repository_name: str | None = None
    ready: bool = Field(False, description="list only the models ready for inference")


class RepositoryModel(BaseModel):
    name: str = Field(examples=["capsnet"])
    version: str = Field(examples=["1"])
    state: Literal["READY", "UNAVAILABLE", "LOADING"] = Field(examples=["READY"])
    reason: str = Field(examples=[""], description="why the model is not ready (`unloaded`); empty when it is")


class RepositoryLoadRequest(BaseModel):
    """Triton's load request; the overrides it can carry (`config`, `file:...`) are refused: this repository is the
    weights directory and its card."""

    parameters: dict[str, Any] = Field(default_factory=dict)


class ServerMetadata(BaseModel):
    name: str = Field(examples=["capsnet-serve"])
    version: str = Field(examples=["1.0.0"])
    extensions: list[str] = Field(examples=[["binary_tensor_data", "model_configuration", "statistics"]])


class TensorMetadata(BaseModel):
    name: str = Field(examples=["image"])
    datatype: str = Field(description="BOOL, UINT8-64, INT8-64, FP16, FP32, FP64, BF16 or BYTES", examples=["FP32"])
    shape: list[int] = Field(description="-1: any size (the batch axis)", examples=[[-1, 1, 28, 28]])


class ModelMetadata(BaseModel):
    name: str = Field(examples=["capsnet"])
    versions: list[str] = Field(examples=[["1"]])
    platform: str = Field(examples=["onnxruntime_onnx"])
    inputs: list[TensorMetadata]
    outputs: list[TensorMetadata]


class InferInput(BaseModel):
    name: str
    shape: list[int]
    datatype: str
    parameters: dict[str, Any] | None = Field(None, description="`binary_data_size`: the tensor's bytes follow the JSON header")
    data: list[Any] | None = Field(None, description="row-major values, flat or nested; absent with binary_data_size")


class InferRequestedOutput(BaseModel):
    name: str
    parameters: dict[str, Any] | None = Field(None, description="`binary_data`: true to get the tensor's bytes after the JSON header")


class InferenceRequest(BaseModel):
    """Inputs are the model's own tensors, fed as they are (no preprocessing): `capsnet` takes `image` FP32 [N,1,28,28]
    in [0,1], `decoder` takes `digit` INT64 [N] (or [N,1]) and `pose` FP32 [N,16]. No `outputs`: every output."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "42",
                    "inputs": [
                        {"name": "digit", "shape": [1], "datatype": "INT64", "data": [3]},
                        {"name": "pose", "shape": [1, POSE_DIM], "datatype": "FP32", "data": EXAMPLE_POSE},
                    ],
                    "outputs": [{"name": "reconstruction"}],
                }
            ]
        }
    )

    id: str | None = Field(None, description="echoed in the response")
    parameters: dict[str, Any] | None = Field(None, description="`binary_data_output`: true for every output in binary")
    inputs: list[InferInput]
    outputs: list[InferRequestedOutput] | None = None


class InferOutput(BaseModel):
    name: str
    shape: list[int]
    datatype: str
    parameters: dict[str, Any] | None = Field(None, description="`binary_data_size` for an output sent in binary")
    data: list[Any] | None = Field(None, description="flat, row-major; absent for an output sent in binary")


class InferenceResponse(BaseModel):
    model_config = ConfigDict(protected_namespaces=())

    model_name: str = Field(examples=["decoder"])
    model_version: str | None = Field(None, examples=["1"])
    id: str | None = None
    outputs: list[InferOutput]


class TritonModelConfig(BaseModel):
    """Triton's ModelConfig (model_config.proto) as JSON, with dims that leave out the batch axis."""

    model_config = ConfigDict(extra="allow")

    name: str
    platform: str
    max_batch_size: int
    input: list[dict[str, Any]]
    output: list[dict[str, Any]]


class ModelStatistics(BaseModel):
    model_stats: list[dict[str, Any]] = Field(
        description="per model and version: name, version, last_inference, inference_count, "
        "execution_count, inference_stats {success, fail, queue, compute_input, "
        "compute_infer, compute_output: {count, ns}}, batch_stats"
    )
