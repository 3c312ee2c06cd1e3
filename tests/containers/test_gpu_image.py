"""The GPU image's build path, without a GPU: the Dockerfile's default flavour (onnxruntime-gpu) built on a base that,
like nvidia/cuda, has no python3 (the python-base stage must install it), then run where CUDA cannot load. It must
say so in its log, once, serve on the CPU, and name the CPU provider in /readyz.

Untested here: the real nvidia/cuda base (no registry is reachable) and a GPU."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.containers.engine import GPU_PATH_IMAGE, NO_PYTHON_BASE, Engine, container, mnist_seven_png, predict, wait_ready


@pytest.fixture(scope="module")
def gpu_path_image(engine: Engine) -> Iterator[str]:
    engine.build(GPU_PATH_IMAGE, {"BASE_IMAGE": NO_PYTHON_BASE})  # ORT_REQUIREMENTS: the Dockerfile's default, the GPU wheel
    yield GPU_PATH_IMAGE


def test_base_has_no_python(engine: Engine) -> None:
    """The stand-in is a fair test of the python-base stage only if it lacks Python as nvidia/cuda does."""
    assert engine("run", "--rm", NO_PYTHON_BASE, "sh", "-c", "command -v python3 || echo none").stdout.strip() == "none"


def test_without_cuda_says_so_and_serves_on_the_cpu(engine: Engine, gpu_path_image: str) -> None:
    name = "capsnet-test-gpu-path"
    with container(engine, gpu_path_image, name) as url:  # the image's own CAPSNET_PROVIDERS default: cuda,cpu
        assert wait_ready(url) == {"status": "ready", "provider": "CPUExecutionProvider", "device": "CPU"}
        assert engine("exec", name, "python", "-c", "import onnxruntime; print(onnxruntime.get_device())").stdout.strip() == "GPU"
        assert predict(url, mnist_seven_png())["prediction"] == 7
        log = engine.logs(name)
    assert "asked for CUDAExecutionProvider, but onnxruntime placed the model on CPUExecutionProvider" in log
    assert log.count("Failed to create CUDAExecutionProvider") == 1, "onnxruntime retried CUDA for every session"
