"""The Open Inference Protocol (KServe v2, Triton) apart from any transport: tensors in and out (REST's codec and gRPC's),
the models and how each runs, Triton's model configuration, statistics; and the gRPC server beside the REST routes."""
