"""What machine and libraries a benchmark ran on: figures mean nothing without it."""

from __future__ import annotations

import contextlib
import os
import platform
from importlib import metadata

from model.machine import cpu_model


def describe() -> dict:
    versions = {}
    for pkg in ("onnxruntime", "onnxruntime-gpu", "numpy", "torch", "fastapi", "uvicorn"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[pkg] = metadata.version(pkg)
    try:
        import onnxruntime as ort

        providers = ort.get_available_providers()
    except ImportError:
        providers = []
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "versions": versions,
        "onnxruntime_providers": providers,
        "env": {k: os.environ[k] for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OMP_NUM_THREADS") if k in os.environ},
    }
