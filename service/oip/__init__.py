"""The Open Inference Protocol (KServe v2, Triton) apart from the REST API: tensors in and out, and statistics."""
