"""Decode and preprocess: the uploaded images decoded (bounded pool for large ones) and made to look like MNIST,
the tensors the models take."""
