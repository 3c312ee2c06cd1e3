"""CapsNet of Sabour, Frosst & Hinton (2017): network, data, training, evaluation and ONNX export."""
