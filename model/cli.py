"""What every command of the project shares: how it logs."""

from __future__ import annotations

import logging

QUIET = ("onnxscript", "onnx_ir")  # torch.onnx's exporter reports each of its passes at INFO


def log_to_console() -> None:
    """INFO and up, with time and source (the exporter's loggers only from WARNING)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for name in QUIET:
        logging.getLogger(name).setLevel(logging.WARNING)
