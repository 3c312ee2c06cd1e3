"""Triton's model configuration (model_config.proto's ModelConfig), built in one place as tritonclient's protobuf message.

Why one builder: three readers need the same description of a graph, and each used to have its own: the Triton model
repository (deploy/triton writes it as config.pbtxt), the Open Inference Protocol's configuration extension over REST
(`GET /v2/models/{m}/config`, as JSON) and over gRPC (ModelConfig, the message itself). Built here from the
protocol's own tensor signatures (service.engine.protocol.TensorSpec), what Triton serves and what this service
declares cannot drift apart, and the message is valid by construction (a misspelt field is an error, not a key that
Triton ignores).

Field names and meanings: Triton's model_configuration.md and model_config.proto; the TensorRT options: optimization.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from google.protobuf import text_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from tritonclient.grpc import model_config_pb2 as mc

from service.engine.tensors import TensorSpec

PLATFORM = "onnxruntime_onnx"
BACKEND = "onnxruntime"
# The protocol's data type -> Triton's (BYTES is TYPE_STRING in model_config.proto)
DATA_TYPES = {
    "BOOL": mc.TYPE_BOOL,
    "UINT8": mc.TYPE_UINT8,
    "UINT16": mc.TYPE_UINT16,
    "UINT32": mc.TYPE_UINT32,
    "UINT64": mc.TYPE_UINT64,
    "INT8": mc.TYPE_INT8,
    "INT16": mc.TYPE_INT16,
    "INT32": mc.TYPE_INT32,
    "INT64": mc.TYPE_INT64,
    "FP16": mc.TYPE_FP16,
    "FP32": mc.TYPE_FP32,
    "FP64": mc.TYPE_FP64,
    "BF16": mc.TYPE_BF16,
    "BYTES": mc.TYPE_STRING,
}
KINDS = {"gpu": mc.ModelInstanceGroup.KIND_GPU, "cpu": mc.ModelInstanceGroup.KIND_CPU}
# TensorRT builds an engine per input-shape profile and rebuilds it when a larger batch arrives: 1 GiB of workspace is
# Triton's own example value, far more than a 28x28 network needs.
TENSORRT_WORKSPACE_BYTES = 1 << 30


@dataclass(frozen=True)
class Serving:
    """How one model is served: the knobs that are not in the graph."""

    max_batch_size: int
    kind: str = "gpu"  # instance_group kind: gpu or cpu
    instances: int = 1  # model instances per device (the service: batches it runs at once)
    max_queue_delay_us: int | None = 0  # dynamic batcher: 0 takes what is queued; None: no dynamic batcher at all
    tensorrt_fp16: bool = False
    warmup: bool = True  # zero inputs before the model is ready (Triton runs them; the service warms up its own way)


def api_dims(spec: TensorSpec) -> tuple[list[int], bool]:
    """(dims without the batch axis, whether the graph needs a reshape).

    Triton prepends the batch axis itself when max_batch_size > 0, and every tensor must keep at least one dim: a graph
    tensor that is the batch axis alone ([N], the decoder's `digit`) is declared [1] and reshaped to [] for the model."""
    if not spec.shape or spec.shape[0] != -1:
        raise ValueError(f"{spec.name}: the first axis must be a dynamic batch axis, got shape {list(spec.shape)}")
    rest = spec.shape[1:]
    if any(d < 0 for d in rest):
        raise ValueError(f"{spec.name}: only the batch axis may be dynamic, got shape {list(spec.shape)}")
    return ([1], True) if not rest else (list(rest), False)


def data_type(spec: TensorSpec) -> int:
    try:
        return DATA_TYPES[spec.datatype]
    except KeyError:
        raise ValueError(f"{spec.name}: data type {spec.datatype} has no Triton data type") from None


def _declare(entry: mc.ModelInput | mc.ModelOutput, spec: TensorSpec) -> None:
    dims, reshape = api_dims(spec)
    entry.name, entry.data_type = spec.name, data_type(spec)
    entry.dims.extend(dims)
    if reshape:
        entry.reshape.SetInParent()  # shape [] (an empty message is not the same as no reshape)


def _warmup(config: mc.ModelConfig, inputs: Sequence[TensorSpec], batch_sizes: list[int]) -> None:
    """Zero inputs at the largest batch first, then at one: TensorRT sizes its engine's profile from the shapes it has
    seen, so the largest first spares a rebuild later; the CUDA provider's first calls are slow too. Triton reports the
    model ready only after these ran (model_configuration.md, Model Warmup)."""
    for n in batch_sizes:
        warmup = config.model_warmup.add(name=f"zeros, batch {n}", batch_size=n)
        for spec in inputs:
            dims, _ = api_dims(spec)  # as the inference API sees it: the reshape still applies
            warmup.inputs[spec.name].CopyFrom(mc.ModelWarmup.Input(data_type=data_type(spec), dims=dims, zero_data=True))


def build_config(
    name: str,
    inputs: Sequence[TensorSpec],
    outputs: Sequence[TensorSpec],
    serving: Serving,
    *,
    platform: str | None = None,
    model_file: str | None = None,
    group_name: str | None = None,
) -> mc.ModelConfig:
    """The model's ModelConfig. `platform`, `model_file` (default_model_filename) and `group_name` (the instance group's
    name) are what a running server reports of itself; a repository's config.pbtxt leaves them to Triton."""
    if serving.kind not in KINDS:
        raise ValueError(f"unknown instance kind {serving.kind!r}; use one of {', '.join(KINDS)}")
    if serving.tensorrt_fp16 and serving.kind != "gpu":
        raise ValueError("the TensorRT accelerator runs on a GPU instance only")
    config = mc.ModelConfig(name=name, backend=BACKEND, max_batch_size=serving.max_batch_size)
    if platform is not None:
        config.platform = platform
        config.version_policy.latest.num_versions = 1
    for spec in inputs:
        _declare(config.input.add(), spec)
    for spec in outputs:
        _declare(config.output.add(), spec)
    group = config.instance_group.add(kind=KINDS[serving.kind], count=serving.instances)
    if group_name is not None:
        group.name = group_name
    if model_file is not None:
        config.default_model_filename = model_file
    if serving.max_queue_delay_us is not None:
        config.dynamic_batching.SetInParent()  # present even with every field at its default
        config.dynamic_batching.max_queue_delay_microseconds = serving.max_queue_delay_us
    if serving.warmup:
        _warmup(config, inputs, sorted({serving.max_batch_size, 1}, reverse=True))
    if serving.tensorrt_fp16:
        config.optimization.execution_accelerators.gpu_execution_accelerator.add(
            name="tensorrt", parameters={"precision_mode": "FP16", "max_workspace_size_bytes": str(TENSORRT_WORKSPACE_BYTES)}
        )
    return config


# ---- the message as text and as JSON ----


def to_pbtxt(config: mc.ModelConfig, header: str = "") -> str:
    """protobuf text format, as Triton reads config.pbtxt; `header` lines become # comments."""
    comments = "".join(f"# {line}\n" for line in header.splitlines())
    return comments + text_format.MessageToString(config)


def parse_pbtxt(text: str) -> mc.ModelConfig:
    return text_format.Parse(text, mc.ModelConfig())


def _value(field: FieldDescriptor, value: Any) -> Any:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        return to_json(value)
    if field.type == FieldDescriptor.TYPE_ENUM:
        return field.enum_type.values_by_number[value].name
    return value  # 64-bit integers stay numbers, as Triton writes them (protobuf's JSON mapping would quote them)


def to_json(message: Message) -> dict[str, Any]:
    """The message as Triton's `GET .../config` writes it: fields in their declaration order, proto field names, enums
    by name, 64-bit integers as numbers, and every field that is not a message printed at its default too (protobuf's
    always_print_primitive_fields, as Triton sets it), so an input says `"format": "FORMAT_NONE"` and a reshape to a
    scalar `"shape": []`; a message field only where it is set. json_format.ParseDict reads it back to the same message."""
    out: dict[str, Any] = {}
    for field in message.DESCRIPTOR.fields:
        singular_message = field.message_type is not None and not field.is_repeated
        if (singular_message or field.containing_oneof is not None) and not message.HasField(field.name):
            continue
        value = getattr(message, field.name)
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            out[field.name] = {k: _value(value_field, v) for k, v in value.items()}
        elif field.is_repeated:
            out[field.name] = [_value(field, v) for v in value]
        else:
            out[field.name] = _value(field, value)
    return out
