"""The Open Inference Protocol's tensors as gRPC carries them (Triton's grpc_service.proto): ModelInferRequest in,
ModelInferResponse out.

A request's tensors come either typed, each input's values in the `contents` field of its data type (fp32_contents for
FP32, int64_contents for INT64, ...), or raw, every input's little-endian bytes in `raw_input_contents`, in input order;
one request uses one way for all its inputs, as Triton requires. Answers are raw (`raw_output_contents`), as Triton's
are: what tritonclient's InferResult.as_numpy reads. Why here and not in the servicer: the same rules and messages as the
REST codec (service/oip/codec.py's check_* functions), so a tensor refused over one transport is refused over the other
with the same words.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from tritonclient.grpc import service_pb2 as pb

from service.engine.tensors import TensorSpec
from service.oip.codec import (
    InferRequest,
    ModelSpec,
    bad,
    check_batch,
    check_datatype,
    check_finite,
    check_input_names,
    check_output,
    check_shape,
    from_binary,
    refuse_unsupported,
)

# Which typed field holds each data type's values (grpc_service.proto's InferTensorContents); FP16 and BF16 have none
# and travel raw only
CONTENTS = {
    "BOOL": "bool_contents",
    "INT8": "int_contents",
    "INT16": "int_contents",
    "INT32": "int_contents",
    "INT64": "int64_contents",
    "UINT8": "uint_contents",
    "UINT16": "uint_contents",
    "UINT32": "uint_contents",
    "UINT64": "uint64_contents",
    "FP32": "fp32_contents",
    "FP64": "fp64_contents",
    "BYTES": "bytes_contents",
}


def _typed(spec: TensorSpec, shape: tuple[int, ...], contents: pb.InferTensorContents) -> np.ndarray:
    want = CONTENTS.get(spec.datatype)
    present = [f.name for f, _ in contents.ListFields()]
    if present and present != [want]:
        raise bad(f"input '{spec.name}': {spec.datatype} values go in contents.{want}, got {', '.join(present)}")
    values = getattr(contents, want) if want else ()
    n = math.prod(shape)
    if len(values) != n:
        raise bad(f"input '{spec.name}': {len(values)} values for shape {list(shape)}, which holds {n}")
    try:
        return np.array(values, dtype=spec.dtype).reshape(shape)
    except OverflowError:
        raise bad(f"input '{spec.name}': a value is out of range for {spec.datatype}") from None


def parse_infer(model: ModelSpec, request: pb.ModelInferRequest) -> InferRequest:
    """The whole infer request, checked against the model's signature."""
    check_input_names(model, [t.name for t in request.inputs])
    raw = request.raw_input_contents
    if raw and len(raw) != len(request.inputs):
        raise bad(f"raw_input_contents holds {len(raw)} tensors for {len(request.inputs)} inputs: send every input raw, or none")
    specs = {t.name: t for t in model.inputs}
    arrays: dict[str, np.ndarray] = {}
    for i, tensor in enumerate(request.inputs):
        spec = specs[tensor.name]
        check_datatype(spec, tensor.datatype)
        shape = check_shape(spec, list(tensor.shape))
        refuse_unsupported(tensor.parameters, f"input '{spec.name}'")
        if raw:
            if tensor.HasField("contents"):
                raise bad(f"input '{spec.name}' has both contents and raw_input_contents")
            arrays[spec.name] = check_finite(spec, from_binary(spec, shape, raw[i]))
        else:
            arrays[spec.name] = check_finite(spec, _typed(spec, shape, tensor.contents))
    chosen: list[tuple[TensorSpec, bool]] = []
    for wanted in request.outputs:
        spec = check_output(model, wanted.name, chosen)
        refuse_unsupported(wanted.parameters, f"output '{wanted.name}'")
        chosen.append((spec, True))
    return InferRequest(request.id or None, arrays, chosen or [(t, True) for t in model.outputs], check_batch(model, arrays))


def encode_infer(
    model: ModelSpec, version: str, request_id: str | None, outputs: Sequence[tuple[TensorSpec, np.ndarray]]
) -> pb.ModelInferResponse:
    """The answer, every output raw, in output order; the weights' version in its parameters, as over REST."""
    response = pb.ModelInferResponse(model_name=model.name, model_version=version, id=request_id or "")
    response.parameters["weights_version"].string_param = model.weights_version
    for spec, arr in outputs:
        response.outputs.add(name=spec.name, datatype=spec.datatype, shape=arr.shape)
        response.raw_output_contents.append(np.ascontiguousarray(arr, spec.dtype.newbyteorder("<")).tobytes())
    return response
