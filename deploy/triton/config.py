"""One Triton ModelConfig for one ONNX graph: the graph's edges as read from its file, declared by the service's own
builder (service/oip/triton_config.py), so that the repository Triton loads and the configuration the service reports
for the same graph are one message built one way.

Field names and meanings: Triton's model_configuration.md and model_config.proto (the ModelConfig message that
tritonclient.grpc.model_config_pb2 is generated from); the TensorRT options: Triton's optimization.md.
"""

from __future__ import annotations

from tritonclient.grpc import model_config_pb2 as mc

from deploy.triton.graph import Signature, Tensor
from service.oip import triton_config
from service.oip.triton_config import TENSORRT_WORKSPACE_BYTES, Serving, parse_pbtxt, to_pbtxt

__all__ = ["TENSORRT_WORKSPACE_BYTES", "Serving", "api_dims", "build_config", "parse_pbtxt", "to_pbtxt"]


def api_dims(tensor: Tensor) -> tuple[list[int], bool]:
    """(dims without the batch axis, whether the graph needs a reshape): service.oip.triton_config.api_dims."""
    return triton_config.api_dims(tensor.spec())


def build_config(name: str, signature: Signature, serving: Serving) -> mc.ModelConfig:
    """The repository's config.pbtxt for one graph: what Triton needs, nothing it reports of itself (platform, file name)."""
    return triton_config.build_config(name, [t.spec() for t in signature.inputs], [t.spec() for t in signature.outputs], serving)
