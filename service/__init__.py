"""capsnet-serve: the CapsNet's ONNX files behind a FastAPI service on onnxruntime (no torch: requirements/serve.txt)."""
