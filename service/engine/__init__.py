"""The model phase: the model card, what runs the graphs (the engine Protocol, onnxruntime in process or a remote
Open Inference Protocol server), the batcher in front of it, the two-digit network, and the routing inspector."""
