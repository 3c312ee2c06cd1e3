"""CapsNet: the network, MNIST, and the commands that train, export and measure it.

No imports here: the service imports model.affine (and these names) without torch."""

MNIST_DIR = "../shared/data/mnist"  # where every command looks for MNIST's IDX files unless told (--data)
FP32_FILE = "capsnet.onnx"  # the exported network; its INT8 twin's name is in the model card (`int8.file`)
INT8_FILE = "capsnet-int8.onnx"
DECODER_FILE = "decoder.onnx"
DECODER_INT8_FILE = "decoder-int8.onnx"  # the counterfactual redraws on the CPU (model/quantize.py; the card's `int8.decoder`)
MULTIMNIST_FILE = "multimnist.onnx"  # two overlapping digits on 36x36 (model/export_multimnist.py; the card's `multimnist` entry)
MULTIMNIST_DECODER_FILE = "multimnist-decoder.onnx"
MNIST_DIGIT_BOX = 20  # MNIST's digits were fit to this box of their 28x28 frame; a MultiMNIST pair is two such digits
# what each pose dimension does (model/atlas.py), by network: the MNIST one, and the two-digit one
ATLAS_FILES = {"capsnet": "dimensions.json", "multimnist": "multimnist-dimensions.json"}
