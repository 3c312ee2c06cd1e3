"""capsnet-serve: the CapsNet's ONNX files behind a FastAPI service (onnxruntime, numpy and Pillow; no torch)."""
