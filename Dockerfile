# syntax=docker/dockerfile:1
#
# CapsNet inference service: FastAPI + onnxruntime, no torch, no training code.
#
#   GPU image (default; the host needs the NVIDIA driver and nvidia-container-toolkit):
#     docker build -t capsnet-serve:gpu .
#   CPU image:
#     docker build -t capsnet-serve:cpu \
#       --build-arg BASE_IMAGE=python:3.11-slim-bookworm \
#       --build-arg ORT_REQUIREMENTS=requirements/ort-cpu.txt .
#
# BASE_IMAGE: the CUDA + cuDNN shared libraries that the onnxruntime-gpu wheel pinned in
#   requirements/ort-gpu.txt loads from the system. onnxruntime-gpu 1.31.1 on PyPI is the
#   CUDA 13 build (its wheel metadata: extra "cuda" -> nvidia-cuda-runtime~=13.0, extra
#   "cudnn" -> nvidia-cudnn-cu13~=9.0), so the default is a CUDA 13.0 + cuDNN 9 runtime
#   image. A CUDA 12 base would leave the CUDA execution provider unable to load
#   (libcudart.so.13 etc. missing) and ORT would fall back to the CPU. CUDA 13 needs an
#   NVIDIA driver >= 580 on the host. The "runtime" flavour has the shared libraries
#   only (no nvcc, no headers). If you change the pin in ort-gpu.txt, re-check this tag.
# ORT_REQUIREMENTS: which onnxruntime wheel to install next to requirements/serve.txt.
#   The requirements files are the single source of truth for versions; nothing is
#   pinned here.
#
# How Python is provided: the venv is created and used on the SAME interpreter.
#   A venv is not relocatable across interpreters (bin/python is a symlink to the
#   interpreter that created it, and compiled wheels are tagged for its version), so
#   the "python-base" stage below adds Python to BASE_IMAGE only when it lacks one,
#   and both the builder and the runtime stage start FROM it:
#   - nvidia/cuda:*-ubuntu24.04 has no Python: apt installs Ubuntu 24.04's python3
#     (3.12) and python3-venv;
#   - python:3.11-slim-bookworm already has /usr/local/bin/python3 (3.11) with venv
#     and ensurepip: nothing is installed.
#   Everything serve.txt + ort-*.txt resolve to has x86_64 wheels for both 3.11 and
#   3.12 (checked with pip install --dry-run --only-binary=:all: --python-version).
#   Any other Debian/Ubuntu-based BASE_IMAGE works the same way.

ARG BASE_IMAGE=nvidia/cuda:13.0.1-cudnn-runtime-ubuntu24.04
ARG ORT_REQUIREMENTS=requirements/ort-gpu.txt

# ---------------------------------------------------------------------------------------
# python-base: BASE_IMAGE plus a python3 able to create virtual environments.
FROM ${BASE_IMAGE} AS python-base

# Unpinned apt packages, deliberately: the distribution release is pinned by the
# BASE_IMAGE tag, and Ubuntu/Debian drop superseded package versions from their
# archives, so an exact pin (python3=3.12.3-0ubuntu2.x) would stop building after the
# next security update. The base image tag is what to pin (or pin it by digest).
# hadolint ignore=DL3008
RUN if python3 -c 'import ensurepip, venv' 2>/dev/null; then \
        echo "BASE_IMAGE already provides python3 with venv: $(python3 --version)"; \
    else \
        apt-get update \
        && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
            python3 \
            python3-venv \
        && rm -rf /var/lib/apt/lists/*; \
    fi

# ---------------------------------------------------------------------------------------
# builder: /opt/venv with the serving dependencies only (no torch, no onnx, no tests).
FROM python-base AS builder
ARG ORT_REQUIREMENTS

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_INPUT=1

WORKDIR /build
COPY requirements/serve.txt requirements/ort-cpu.txt requirements/ort-gpu.txt requirements/
RUN python3 -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir \
        -r requirements/serve.txt \
        -r "${ORT_REQUIREMENTS}"

# ---------------------------------------------------------------------------------------
# runtime: the venv from the builder, the service code, the UI and the exported weights.
FROM python-base AS runtime

LABEL org.opencontainers.image.title="capsnet-serve" \
      org.opencontainers.image.description="CapsNet MNIST classifier served by FastAPI on onnxruntime"

# /opt/venv/bin first on PATH: "python" below is the venv's interpreter on every base
# image (Ubuntu has no "python" command of its own).
ENV PATH="/opt/venv/bin:${PATH}" \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    CAPSNET_HOST=0.0.0.0 \
    CAPSNET_PORT=8000 \
    CAPSNET_WEIGHTS_DIR=/app/weights

# Unprivileged user with a fixed numeric id (usable with runAsNonRoot and volume
# permissions). It has a home so that the CUDA driver can keep its JIT cache in ~/.nv.
RUN groupadd --system --gid 10001 capsnet \
    && useradd --system --uid 10001 --gid capsnet --no-log-init \
        --create-home --home-dir /home/capsnet --shell /usr/sbin/nologin capsnet

COPY --from=builder /opt/venv /opt/venv

# Code and assets stay owned by root: the service only reads them.
WORKDIR /app
COPY service/ service/
# the pieces of model/ the service runs, numpy and OpenCV, no torch: the affine transforms /probe applies, and the IDX
# reader for the page's random pairs of MNIST test digits (where CAPSNET_MNIST_DIR is mounted)
COPY model/__init__.py model/affine.py model/idx.py model/digit_rule.py model/pair_rule.py model/
COPY static/ static/
COPY templates/ templates/
COPY weights/ weights/

USER 10001:10001

EXPOSE 8000

# uvicorn drains in-flight requests on SIGTERM within CAPSNET_GRACEFUL_TIMEOUT_S; give
# `docker stop` a longer --time (compose: stop_grace_period) than that.
STOPSIGNAL SIGTERM

# start-period covers loading the ONNX sessions and the warm-up runs (until then the port
# refuses connections, or with CAPSNET_PROCESSES=1 /readyz answers 503); the probe is
# stdlib-only, the image has no curl.
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-m", "service.healthcheck"]

# CAPSNET_PROCESSES worker processes behind the port, two by default (one where one CPU is all
# the container may use); each holds its own micro-batcher and ONNX sessions.
CMD ["python", "-m", "service"]
