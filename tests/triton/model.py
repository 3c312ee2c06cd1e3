"""A test double of Triton's ONNX Runtime backend: a Python-backend model that runs `1/model.onnx`.

tests/triton/test_real_triton.py copies the generated repository, swaps `backend: "onnxruntime"` for
`backend: "python"` and puts this file beside each model's ONNX file. Inputs and outputs keep the names,
types and shapes of the model's config.pbtxt, so the protocol seen by a client is the real server's.
"""

import json
import os

import numpy as np
import onnxruntime as ort
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        here = os.path.join(args["model_repository"], args["model_version"])
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(os.path.join(here, "model.onnx"), options, providers=["CPUExecutionProvider"])
        self.inputs = [i["name"] for i in config["input"]]
        self.outputs = [o["name"] for o in config["output"]]

    def execute(self, requests):
        responses = []
        for request in requests:
            feeds = {name: pb_utils.get_input_tensor_by_name(request, name).as_numpy() for name in self.inputs}
            results = self.session.run(self.outputs, feeds)
            responses.append(
                pb_utils.InferenceResponse(
                    output_tensors=[pb_utils.Tensor(name, np.ascontiguousarray(value)) for name, value in zip(self.outputs, results)]
                )
            )
        return responses
