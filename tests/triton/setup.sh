#!/usr/bin/env bash
# The real-Triton test's own environment (tests/triton/test_real_triton.py): a venv with nvidia-pytriton's
# tritonserver binary (Python backend only), numpy<2 and onnxruntime for the Python-backend test double of the
# ONNX Runtime backend. Idempotent: a second run with the same pins returns at once.
#   tests/triton/setup.sh [VENV]   (default: .triton-venv beside .venv; PYTHON picks the interpreter, default python3)
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV=${1:-.triton-venv}
PYTHON=${PYTHON:-python3}
PINS=(nvidia-pytriton==0.7.0 "numpy<2" onnxruntime==1.20.1)
STAMP="$VENV/.triton-ready"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "${PINS[*]}" ]; then exit 0; fi
rm -rf "$VENV"
"$PYTHON" -m venv "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check "${PINS[@]}"
# As pytriton does before it starts the server: a copy of its tritonserver tree with this Python's stub
# in the Python backend's directory (the stub links libpython of this minor version).
"$VENV/bin/python" - "$VENV" <<'PY'
import shutil, sys
from pathlib import Path
import pytriton
dist = Path(pytriton.__file__).parent / "tritonserver"
out = Path(sys.argv[1]) / "tritonserver"
shutil.rmtree(out, ignore_errors=True)
shutil.copytree(dist, out, ignore=shutil.ignore_patterns("python_backend_stubs", "__pycache__"))
stub = dist / "python_backend_stubs" / f"{sys.version_info[0]}.{sys.version_info[1]}" / "triton_python_backend_stub"
shutil.copy2(stub, out / "backends" / "python" / "triton_python_backend_stub")
PY
echo "${PINS[*]}" > "$STAMP"
