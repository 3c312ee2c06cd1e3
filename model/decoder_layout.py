"""Where each layer of a decoder's weights lies inside its committed ONNX file, for the page's decoder.

The page redraws a pose in the browser (static/capsule_decoder.js) from the very file the service runs: it downloads
`decoder.onnx` (or `multimnist-decoder.onnx`) byte for byte, checks it against the card's sha256, and reads each layer's
float32 values at the offsets written here into the card's `decoder.tensors`. So the browser needs no ONNX parser and
the service no second copy of the weights.

`python -m model.decoder_layout` writes the offsets of both decoders into weights/model-card.json; the exports call
`tensors()` for the files they write.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

import onnx

from model import DECODER_FILE, MULTIMNIST_DECODER_FILE
from model.cli import log_to_console

log = logging.getLogger("capsnet.decoder_layout")

# the decoder's three dense layers in the order they run: [out, in] weights (Gemm with transB), then [out] biases
LAYERS = tuple(f"decoder.net.{i}.{part}" for i in (0, 2, 4) for part in ("weight", "bias"))


def tensors(path: str | Path) -> dict[str, dict]:
    """{name: {"offset": byte offset of its little-endian float32 values in the file, "shape": [...]}} for each layer.

    The values are found by their bytes in the file; a run of bytes found twice (which float weights never are) is an
    error rather than a guess."""
    path = Path(path)
    data = path.read_bytes()
    found = {i.name: i for i in onnx.load_from_string(data).graph.initializer}
    out = {}
    for name in LAYERS:
        init = found.get(name)
        if init is None or init.data_type != onnx.TensorProto.FLOAT or not init.raw_data:
            raise ValueError(f"{path}: no float32 initializer {name} stored as raw data; was it exported by model/export.py?")
        offset = data.find(init.raw_data)
        if offset < 0 or data.find(init.raw_data, offset + 1) >= 0:
            raise ValueError(f"{path}: the bytes of {name} do not occur exactly once in the file")
        out[name] = {"offset": offset, "shape": list(init.dims)}
    return out


def main(argv: list[str] | None = None) -> None:
    log_to_console()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--weights", default="weights", help="the directory holding the decoders and model-card.json")
    args = p.parse_args(argv)
    weights = Path(args.weights)
    card_path = weights / "model-card.json"
    card = json.loads(card_path.read_text())
    card["decoder"]["tensors"] = tensors(weights / DECODER_FILE)
    if "multimnist" in card:
        card["multimnist"]["decoder"]["tensors"] = tensors(weights / MULTIMNIST_DECODER_FILE)
    card_path.write_text(json.dumps(card, indent=1) + "\n")
    log.info("wrote the decoders' layer offsets into %s", card_path)


if __name__ == "__main__":
    main()
