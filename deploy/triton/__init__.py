"""A Triton Inference Server model repository for the committed ONNX files: `python -m deploy.triton`.

The repository's config.pbtxt files are built as tritonclient's ModelConfig protobuf messages from the ONNX graphs'
own inputs and outputs and the model card, so names, types and dims cannot drift from the files Triton loads.
"""
