"""The Open Inference Protocol (KServe v2, Triton) on the wire: a request's tensors in, a response's tensors out.

Two encodings, as Triton speaks them (its protocol/extension_binary_data.md): JSON tensors (`data`, flat or nested, row
major), and the binary tensor data extension, where the body is a JSON header of `Inference-Header-Content-Length`
bytes followed by each binary input's raw little-endian bytes in input order (`parameters.binary_data_size` each). A
response is binary the same way when an output asks for it (`parameters.binary_data`, or the request's
`parameters.binary_data_output` for every output it does not name).

Why a module of its own, with no FastAPI in it: what a tensor may be is checked here, once, against the model's own
signature as the engine reports it (onnxruntime's session, or the remote engine's metadata), so metadata, config and
validation cannot disagree. Every mistake is an `OIPError`: the protocol's error body `{"error": message}` with the
status Triton gives that kind of error (400 an invalid argument, 404 an unknown model, 503 unavailable). The checks a
tensor meets whatever carries it (`check_*`, `from_binary`) are public: the gRPC codec (service/oip/grpc_codec.py)
holds protobuf tensors to the same rules with the same messages.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from service.engine.tensors import DATATYPES, TensorSpec
from service.errors import BadJSON
from service.http.body import parse_json
from service.oip.triton_config import PLATFORM

HEADER_LENGTH = "Inference-Header-Content-Length"
# JSON numbers numpy may read for each kind of data type: ints are fine for floats, not the other way round
_JSON_KINDS = {"b": "b", "u": "iu", "i": "iu", "f": "iuf"}
_UNSUPPORTED = {"shared_memory_region": "shared memory is not supported", "classification": "the classification extension is not supported"}


class OIPError(Exception):
    """A request the protocol refuses: answered `{"error": message}` with `status`."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers


def bad(message: str) -> OIPError:
    return OIPError(400, message)


@dataclass(frozen=True)
class ModelSpec:
    name: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    max_batch: int  # most rows of the batch axis in one request
    weights_version: str = ""  # the card's version of the weights serving it (a reload changes it; the protocol's stays 1)

    def metadata(self, version: str) -> dict[str, Any]:
        return {
            "name": self.name,
            "versions": [version],
            "platform": PLATFORM,
            "inputs": [t.metadata() for t in self.inputs],
            "outputs": [t.metadata() for t in self.outputs],
        }


@dataclass(frozen=True)
class InferRequest:
    id: str | None
    inputs: dict[str, np.ndarray]  # by name, in the shape and type the model takes
    outputs: list[tuple[TensorSpec, bool]]  # what to answer, in order, and whether in binary
    batch: int


# ---- the request ----


def decompress(body: bytes, encoding: str | None, limit: int) -> bytes:
    """A body sent with Content-Encoding gzip or deflate (tritonclient's request_compression_algorithm), inflated to
    at most `limit` bytes: a small body that inflates past the limit is refused, not inflated."""
    encoding = (encoding or "identity").strip().lower()
    if encoding == "identity":
        return body
    wbits = {"gzip": 31, "deflate": 15}.get(encoding)
    if wbits is None:
        raise bad(f"unsupported Content-Encoding '{encoding}': send gzip, deflate or identity")
    inflater = zlib.decompressobj(wbits)
    try:
        out = inflater.decompress(body, limit + 1)
    except zlib.error as e:
        raise bad(f"the body is not valid {encoding}: {e}") from None
    if len(out) > limit or inflater.unconsumed_tail:
        raise bad(f"the inflated body is over the {limit} byte limit")
    return out


def _split(body: bytes, header_length: str | None) -> tuple[bytes, bytes]:
    """(JSON header, binary tensor data) by the Inference-Header-Content-Length header; all JSON without it."""
    if header_length is None:
        return body, b""
    digits = header_length.strip()
    if not (digits.isascii() and digits.isdigit()) or int(digits) > len(body):
        raise bad(f"{HEADER_LENGTH} {header_length[:40]!r} must be a byte count within the body's {len(body)} bytes")
    n = int(digits)
    return body[:n], body[n:]


def _object(value: Any, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise bad(f"{what} must be a JSON object")
    return value


def refuse_unsupported(parameters: dict[str, Any], what: str) -> None:
    for key, message in _UNSUPPORTED.items():
        if key in parameters:
            raise bad(f"{what}: {message}")


def check_datatype(spec: TensorSpec, datatype: Any) -> None:
    if datatype not in DATATYPES:
        raise bad(f"input '{spec.name}': invalid datatype {datatype!r}; one of {', '.join(DATATYPES)}")
    if datatype != spec.datatype:
        raise bad(f"inference input '{spec.name}' data-type is '{datatype}', but model expects '{spec.datatype}'")


def check_finite(spec: TensorSpec, arr: np.ndarray) -> np.ndarray:
    if arr.dtype.kind == "f" and not np.isfinite(arr).all():
        raise bad(f"input '{spec.name}': NaN or infinite values")
    return arr


def check_input_names(model: ModelSpec, names: Sequence[Any]) -> None:
    """Every input of the model, once each, and nothing else."""
    specs = [t.name for t in model.inputs]
    for name in names:
        if not isinstance(name, str) or name not in specs:
            raise bad(f"unexpected inference input '{name}' for model '{model.name}'; it takes {', '.join(specs)}")
    if sorted(names) != sorted(specs):
        raise bad(f"model '{model.name}' takes exactly the inputs {', '.join(specs)}, got {', '.join(map(str, names)) or 'none'}")


def check_output(model: ModelSpec, name: Any, chosen: Sequence[tuple[TensorSpec, bool]]) -> TensorSpec:
    """An output asked for: one the model has, not asked for twice."""
    specs = {t.name: t for t in model.outputs}
    if not isinstance(name, str) or name not in specs:
        raise bad(f"unexpected inference output '{name}' for model '{model.name}'; it has {', '.join(specs)}")
    if any(t.name == name for t, _ in chosen):
        raise bad(f"output '{name}' requested twice")
    return specs[name]


def check_shape(spec: TensorSpec, shape: Any) -> tuple[int, ...]:
    """The shape sent, checked against the model's; a 1-D input ([N], the decoder's `digit`) also takes [N, 1], as
    Triton serves it (dims [1] with `reshape { shape: [] }`, deploy/triton), so one client fits both servers."""
    if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise bad(f"input '{spec.name}': shape must be a list of non-negative integers")
    if len(spec.shape) == 1 and len(shape) == 2 and shape[1] == 1:
        shape = shape[:1]
    if len(shape) != len(spec.shape) or any(want not in (-1, got) for want, got in zip(spec.shape, shape)):
        also = f" (or {[*spec.shape, 1]})" if len(spec.shape) == 1 else ""
        raise bad(f"unexpected shape for input '{spec.name}': model expects {list(spec.shape)}{also}, got {shape}")
    return tuple(shape)


def _from_json(spec: TensorSpec, shape: tuple[int, ...], data: Any) -> np.ndarray:
    if not isinstance(data, list):
        raise bad(f"input '{spec.name}': data must be a JSON array")
    try:
        arr = np.asarray(data)
    except ValueError:
        raise bad(f"input '{spec.name}': data is ragged") from None
    if arr.size and arr.dtype.kind not in _JSON_KINDS[spec.dtype.kind]:
        raise bad(f"input '{spec.name}': data must be {spec.datatype} numbers")
    if arr.size != math.prod(shape):
        raise bad(f"input '{spec.name}': {arr.size} values for shape {list(shape)}, which holds {math.prod(shape)}")
    with np.errstate(over="ignore", invalid="ignore"):  # out of range for FP32 becomes inf, refused below
        return arr.astype(spec.dtype).reshape(shape)


def from_binary(spec: TensorSpec, shape: tuple[int, ...], raw: bytes) -> np.ndarray:
    want = math.prod(shape) * spec.dtype.itemsize
    if len(raw) != want:
        raise bad(f"input '{spec.name}': {len(raw)} bytes of binary data for shape {list(shape)} of {spec.datatype}, expected {want}")
    return np.frombuffer(raw, spec.dtype.newbyteorder("<")).astype(spec.dtype).reshape(shape)


def _input(spec: TensorSpec, entry: dict[str, Any], binary: memoryview, offset: int) -> tuple[np.ndarray, int]:
    """One input tensor, and where the next one's binary data starts."""
    check_datatype(spec, entry.get("datatype"))
    shape = check_shape(spec, entry.get("shape"))
    parameters = _object(entry.get("parameters"), f"input '{spec.name}': parameters")
    refuse_unsupported(parameters, f"input '{spec.name}'")
    size = parameters.get("binary_data_size")
    if size is None:
        if "data" not in entry:
            raise bad(f"input '{spec.name}' has neither data nor parameters.binary_data_size")
        arr = _from_json(spec, shape, entry["data"])
    else:
        if "data" in entry:
            raise bad(f"input '{spec.name}' has both data and parameters.binary_data_size")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0 or offset + size > len(binary):
            raise bad(f"input '{spec.name}': binary_data_size {size!r} is not within the {len(binary) - offset} bytes of binary data left")
        arr = from_binary(spec, shape, bytes(binary[offset : offset + size]))
        offset += size
    return check_finite(spec, arr), offset


def _inputs(model: ModelSpec, entries: Any, binary: bytes) -> dict[str, np.ndarray]:
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise bad("inputs must be a JSON array of objects")
    specs = {t.name: t for t in model.inputs}
    check_input_names(model, [e.get("name") for e in entries])
    arrays, offset, view = {}, 0, memoryview(binary)
    for entry in entries:
        arrays[entry["name"]], offset = _input(specs[entry["name"]], entry, view, offset)
    if offset != len(binary):
        raise bad(f"{len(binary) - offset} bytes of binary data after the last input's")
    return arrays


def check_batch(model: ModelSpec, arrays: dict[str, np.ndarray]) -> int:
    """The batch axis: the same length in every input, at least 1 (onnxruntime dies on an empty batch) and at most max_batch."""
    sizes = {len(a) for a in arrays.values()}
    if len(sizes) != 1:
        raise bad(f"the inputs of model '{model.name}' must share their first (batch) dimension, got {sorted(sizes)}")
    n = sizes.pop()
    if not 1 <= n <= model.max_batch:
        raise bad(f"inference request batch-size must be between 1 and {model.max_batch} for '{model.name}', got {n}")
    return n


def _outputs(model: ModelSpec, entries: Any, binary_default: bool) -> list[tuple[TensorSpec, bool]]:
    if entries is None:
        return [(t, binary_default) for t in model.outputs]
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise bad("outputs must be a JSON array of objects")
    chosen: list[tuple[TensorSpec, bool]] = []
    for entry in entries:
        name = entry.get("name")
        spec = check_output(model, name, chosen)
        parameters = _object(entry.get("parameters"), f"output '{name}': parameters")
        refuse_unsupported(parameters, f"output '{name}'")
        chosen.append((spec, _flag(parameters, "binary_data", binary_default)))
    return chosen


def _flag(parameters: dict[str, Any], key: str, default: bool) -> bool:
    value = parameters.get(key, default)
    if not isinstance(value, bool):
        raise bad(f"parameter {key} must be true or false")
    return value


def parse_request(model: ModelSpec, body: bytes, header_length: str | None, max_json_values: int) -> InferRequest:
    """The whole infer request, checked against the model's signature."""
    header, binary = _split(body, header_length)
    try:
        doc = parse_json(header, max_json_values)
    except BadJSON as e:
        raise bad(e.detail) from None
    if not isinstance(doc, dict):
        raise bad("the inference request must be a JSON object")
    request_id = doc.get("id")
    if request_id is not None and not isinstance(request_id, str):
        raise bad("id must be a string")
    parameters = _object(doc.get("parameters"), "parameters")
    if "inputs" not in doc:
        raise bad("the inference request has no inputs")
    arrays = _inputs(model, doc["inputs"], binary)
    outputs = _outputs(model, doc.get("outputs"), _flag(parameters, "binary_data_output", False))
    return InferRequest(request_id, arrays, outputs, check_batch(model, arrays))


# ---- the response ----


def encode_response(
    model: ModelSpec, version: str, request_id: str | None, outputs: Sequence[tuple[TensorSpec, np.ndarray, bool]]
) -> tuple[bytes, int | None]:
    """(body, header length): the JSON response, then the binary outputs' bytes in output order; the header length is
    None when no output is binary (the body is all JSON). The weights' version rides in the response's parameters."""
    head: dict[str, Any] = {"model_name": model.name, "model_version": version, "parameters": {"weights_version": model.weights_version}}
    if request_id is not None:
        head["id"] = request_id
    entries, blobs = [], []
    for spec, arr, binary in outputs:
        entry: dict[str, Any] = {"name": spec.name, "datatype": spec.datatype, "shape": list(arr.shape)}
        if binary:
            raw = np.ascontiguousarray(arr, spec.dtype.newbyteorder("<")).tobytes()
            entry["parameters"] = {"binary_data_size": len(raw)}
            blobs.append(raw)
        else:
            entry["data"] = np.ascontiguousarray(arr, spec.dtype).ravel()
        entries.append(entry)
    head["outputs"] = entries
    header = orjson.dumps(head, option=orjson.OPT_SERIALIZE_NUMPY)
    if not blobs:
        return header, None
    return b"".join([header, *blobs]), len(header)
