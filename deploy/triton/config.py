"""One Triton ModelConfig for one ONNX graph, built as tritonclient's protobuf message so it is valid by construction.

Field names and meanings: Triton's model_configuration.md and model_config.proto (the ModelConfig message that
tritonclient.grpc.model_config_pb2 is generated from); the TensorRT options: Triton's optimization.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from deploy.triton.graph import Signature, Tensor

# ONNX element type -> Triton data type, for the types an exported network uses
DATA_TYPES = {
    "FLOAT": mc.TYPE_FP32,
    "FLOAT16": mc.TYPE_FP16,
    "BFLOAT16": mc.TYPE_BF16,
    "DOUBLE": mc.TYPE_FP64,
    "INT8": mc.TYPE_INT8,
    "INT16": mc.TYPE_INT16,
    "INT32": mc.TYPE_INT32,
    "INT64": mc.TYPE_INT64,
    "UINT8": mc.TYPE_UINT8,
    "BOOL": mc.TYPE_BOOL,
}
KINDS = {"gpu": mc.ModelInstanceGroup.KIND_GPU, "cpu": mc.ModelInstanceGroup.KIND_CPU}
# TensorRT builds an engine per input-shape profile and rebuilds it when a larger batch arrives: 1 GiB of workspace is
# Triton's own example value, far more than a 28x28 network needs.
TENSORRT_WORKSPACE_BYTES = 1 << 30


@dataclass(frozen=True)
class Serving:
    """How Triton should serve one model: the knobs that are not in the ONNX graph."""

    max_batch_size: int
    kind: str = "gpu"  # instance_group kind: gpu or cpu
    instances: int = 1  # model instances per device
    max_queue_delay_us: int = 0  # dynamic batcher: 0 takes what is queued, as the service's CAPSNET_MAX_WAIT_MS=0 does
    tensorrt_fp16: bool = False


def api_dims(tensor: Tensor) -> tuple[list[int], bool]:
    """(dims without the batch axis, whether the graph needs a reshape).

    Triton prepends the batch axis itself when max_batch_size > 0, and every tensor must keep at least one dim: a graph
    tensor that is the batch axis alone ([N], the decoder's `digit`) is declared [1] and reshaped to [] for the model."""
    if not tensor.shape or isinstance(tensor.shape[0], int):
        raise ValueError(f"{tensor.name}: the first axis must be a dynamic batch axis, got shape {list(tensor.shape)}")
    rest = tensor.shape[1:]
    if any(not isinstance(d, int) for d in rest):
        raise ValueError(f"{tensor.name}: only the batch axis may be dynamic, got shape {list(tensor.shape)}")
    return ([1], True) if not rest else (list(rest), False)


def data_type(tensor: Tensor) -> int:
    try:
        return DATA_TYPES[tensor.elem_type]
    except KeyError:
        raise ValueError(f"{tensor.name}: ONNX type {tensor.elem_type} has no Triton data type here") from None


def _declare(entry: mc.ModelInput | mc.ModelOutput, tensor: Tensor) -> None:
    dims, reshape = api_dims(tensor)
    entry.name, entry.data_type = tensor.name, data_type(tensor)
    entry.dims.extend(dims)
    if reshape:
        entry.reshape.SetInParent()  # shape [] (an empty message is not the same as no reshape)


def _warmup(config: mc.ModelConfig, signature: Signature, batch_sizes: list[int]) -> None:
    """Zero inputs at the largest batch first, then at one: TensorRT sizes its engine's profile from the shapes it has
    seen, so the largest first spares a rebuild later; the CUDA provider's first calls are slow too. Triton reports the
    model ready only after these ran (model_configuration.md, Model Warmup)."""
    for n in batch_sizes:
        warmup = config.model_warmup.add(name=f"zeros, batch {n}", batch_size=n)
        for tensor in signature.inputs:
            dims, _ = api_dims(tensor)  # as the inference API sees it: the reshape still applies
            warmup.inputs[tensor.name].CopyFrom(mc.ModelWarmup.Input(data_type=data_type(tensor), dims=dims, zero_data=True))


def build_config(name: str, signature: Signature, serving: Serving) -> mc.ModelConfig:
    if serving.kind not in KINDS:
        raise ValueError(f"unknown instance kind {serving.kind!r}; use one of {', '.join(KINDS)}")
    if serving.tensorrt_fp16 and serving.kind != "gpu":
        raise ValueError("the TensorRT accelerator runs on a GPU instance only")
    config = mc.ModelConfig(name=name, backend="onnxruntime", max_batch_size=serving.max_batch_size)
    for tensor in signature.inputs:
        _declare(config.input.add(), tensor)
    for tensor in signature.outputs:
        _declare(config.output.add(), tensor)
    config.instance_group.add(kind=KINDS[serving.kind], count=serving.instances)
    config.dynamic_batching.SetInParent()  # present even with every field at its default
    config.dynamic_batching.max_queue_delay_microseconds = serving.max_queue_delay_us
    _warmup(config, signature, sorted({serving.max_batch_size, 1}, reverse=True))
    if serving.tensorrt_fp16:
        config.optimization.execution_accelerators.gpu_execution_accelerator.add(
            name="tensorrt", parameters={"precision_mode": "FP16", "max_workspace_size_bytes": str(TENSORRT_WORKSPACE_BYTES)}
        )
    return config


def to_pbtxt(config: mc.ModelConfig, header: str = "") -> str:
    """protobuf text format, as Triton reads config.pbtxt; `header` lines become # comments."""
    comments = "".join(f"# {line}\n" for line in header.splitlines())
    return comments + text_format.MessageToString(config)


def parse_pbtxt(text: str) -> mc.ModelConfig:
    return text_format.Parse(text, mc.ModelConfig())
