"""The decoders' committed files, offered to the page so that its pose sliders redraw in the browser
(static/capsule_decoder.js) instead of a round trip away.

Each is served under its sha256 (GET /decoders/<sha256>.onnx): the browser may keep it for good under that name, and a
new export has a new name. A decoder is offered only where its file is the one the card names and the card says where
its layers lie in it (the card's `decoder.tensors`, model/decoder_layout.py); otherwise the page draws on the server.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from model import DECODER_FILE, MULTIMNIST_DECODER_FILE
from service.engine.card import ModelCard, PairCard, WeightsError, verify_files

log = logging.getLogger("capsnet.decoder_files")


@dataclass(frozen=True)
class DecoderFile:
    path: Path
    sha256: str
    bytes: int
    side: int  # the picture it draws is side x side
    tensors: dict[str, dict[str, Any]]  # {layer: {"offset", "shape"}}

    @property
    def url(self) -> str:
        return f"/decoders/{self.sha256}.onnx"

    def page_spec(self) -> dict[str, Any]:
        """What the page's decoder needs to fetch, check and read the file (its data-decoder attribute)."""
        return {"url": self.url, "sha256": self.sha256, "bytes": self.bytes, "side": self.side, "tensors": self.tensors}


def decoder_files(weights_dir: Path, card: ModelCard, pairs: PairCard | None) -> dict[str, DecoderFile]:
    """{"capsnet": ..., "multimnist": ...} for each decoder served here whose file can go to the page (`pairs`: the
    two-digit network's card entry where that network is served)."""
    offered = {}
    for model, entry, name in (("capsnet", card, DECODER_FILE), ("multimnist", pairs, MULTIMNIST_DECODER_FILE)):
        if entry is None or not entry.decoder.tensors or name not in entry.files:
            continue
        try:
            verify_files(weights_dir, entry, [name])
        except WeightsError as e:  # with a remote engine the file need not be here: the page then draws on the server
            log.info("the page's %s sliders draw on the server: %s", model, e)
            continue
        f = entry.files[name]
        tensors = {k: v.model_dump() for k, v in entry.decoder.tensors.items()}
        offered[model] = DecoderFile(weights_dir / name, f.sha256, f.bytes, entry.image_size, tensors)
    return offered
