"""The Open Inference Protocol against a real Triton server: nvidia-pytriton's `tritonserver` binary on
127.0.0.1, serving a copy of deploy/triton/model_repository whose models run their ONNX files in the Python backend.

The wheel ships the Python backend only (no ONNX Runtime backend on PyPI), so each config's `backend: "onnxruntime"`
becomes `backend: "python"` with tests/triton/model.py, a stand-in that runs the same model.onnx with onnxruntime;
names, types, dims, max_batch_size, reshape and dynamic batching are the generated ones. The ONNX Runtime backend
itself is exercised only on a real Triton image. The server runs from its own venv (tests/triton/setup.sh,
.triton-venv); without it these tests skip, unless CAPSNET_REQUIRE_TRITON=1 (as in .ci/run), which fails them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.http as triton
from google.protobuf import json_format
from tritonclient.grpc import model_config_pb2 as mc
from tritonclient.utils import InferenceServerException

from bench.server import free_port
from deploy.triton.config import parse_pbtxt, to_pbtxt
from tests.service.routers.test_oip import (
    CAPSNET_OUTPUT_SIGNATURE,
    CAPSNET_OUTPUTS,
    _decoder_inputs,
    _digits,
    _image_input,
    _pbtxt,
    _status,
)

REPO = Path(__file__).resolve().parents[2]
COMMITTED = REPO / "deploy" / "triton" / "model_repository"
VENV = Path(os.environ.get("CAPSNET_TRITON_VENV", REPO / ".triton-venv"))
MODELS = ("capsnet", "decoder")
READY_S = 120


def _missing(reason: str):
    if os.environ.get("CAPSNET_REQUIRE_TRITON") == "1":
        pytest.fail(f"CAPSNET_REQUIRE_TRITON=1 but {reason}")
    pytest.skip(f"{reason}; run tests/triton/setup.sh")


def python_backend_repository(source: Path, out: Path) -> Path:
    """A copy of a generated repository with the ONNX Runtime backend swapped for tests/triton/model.py: CPU
    instances, no execution accelerators, everything else (tensors, batching, reshape, warmup) as generated."""
    for model in MODELS:
        config = parse_pbtxt((source / model / "config.pbtxt").read_text())
        assert config.backend == "onnxruntime" or config.platform == "onnxruntime_onnx"
        config.ClearField("platform")
        config.backend = "python"
        config.ClearField("optimization")
        for group in config.instance_group:
            group.kind = mc.ModelInstanceGroup.KIND_CPU
            group.ClearField("gpus")
        version = out / model / "1"
        version.mkdir(parents=True)
        (out / model / "config.pbtxt").write_text(to_pbtxt(config))
        shutil.copyfile((source / model / "1" / "model.onnx").resolve(), version / "model.onnx")
        shutil.copyfile(Path(__file__).with_name("model.py"), version / "model.py")
    return out


@pytest.fixture(scope="module")
def tritonserver(tmp_path_factory) -> Iterator[str]:
    home = VENV / "tritonserver"
    if not (VENV / ".triton-ready").exists() or not (home / "bin" / "tritonserver").exists():
        _missing(f"the Triton venv {VENV} is not set up")
    if not all((COMMITTED / m / "1" / "model.onnx").exists() for m in MODELS):
        _missing(f"{COMMITTED} has no ONNX files")
    tmp = tmp_path_factory.mktemp("triton")
    repository = python_backend_repository(COMMITTED, tmp / "model_repository")
    libs = next((VENV / "lib").glob("python3.*/site-packages/nvidia_pytriton.libs"))
    # the stub embeds the Triton venv's Python (setup.sh copied the stub of its minor version): its libpython
    libdir = subprocess.run(
        [str(VENV / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_config_var('LIBDIR'))"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = ":".join(filter(None, [str(libs), libdir, env.get("LD_LIBRARY_PATH")]))
    env["PATH"] = f"{VENV / 'bin'}:{env['PATH']}"  # the stub's interpreter: the Triton venv's numpy<2 and onnxruntime
    env.pop("PYTHONPATH", None)
    http = free_port()
    log = (tmp / "tritonserver.log").open("wb")
    cmd = [
        str(home / "bin" / "tritonserver"),
        f"--model-repository={repository}",
        f"--backend-directory={home / 'backends'}",
        f"--cache-directory={home / 'caches'}",
        "--http-address=127.0.0.1",
        f"--http-port={http}",
        "--allow-grpc=false",
        "--allow-metrics=false",
        f"--backend-config=python,shm-region-prefix-name=capsnet{os.getpid()}",
        "--backend-config=python,shm-default-byte-size=4194304",
        "--exit-timeout-secs=10",
    ]
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"127.0.0.1:{http}"
    try:
        deadline = time.monotonic() + READY_S
        with triton.InferenceServerClient(url=url, network_timeout=5) as c:
            while True:
                if proc.poll() is not None:
                    pytest.fail(f"tritonserver exited ({proc.returncode}):\n{(tmp / 'tritonserver.log').read_text()[-4000:]}")
                with contextlib.suppress(InferenceServerException, OSError):  # not listening yet
                    if c.is_server_ready():
                        break
                if time.monotonic() > deadline:
                    pytest.fail(f"tritonserver not ready in {READY_S} s:\n{(tmp / 'tritonserver.log').read_text()[-4000:]}")
                time.sleep(0.5)
        yield url
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(10)
        log.close()


@pytest.fixture(scope="module")
def client(tritonserver) -> Iterator[triton.InferenceServerClient]:
    with triton.InferenceServerClient(url=tritonserver, network_timeout=60) as c:
        yield c


def _session(model: str) -> ort.InferenceSession:
    return ort.InferenceSession(str((COMMITTED / model / "1" / "model.onnx").resolve()), providers=["CPUExecutionProvider"])


def test_server_and_models_are_live_and_ready(client):
    assert client.is_server_live() and client.is_server_ready()
    for model in MODELS:
        assert client.is_model_ready(model) and client.is_model_ready(model, "1")
    assert not client.is_model_ready("capsnet", "2") and not client.is_model_ready("resnet")
    assert {"binary_tensor_data", "model_configuration", "statistics"} <= set(client.get_server_metadata()["extensions"])


def test_model_metadata_is_the_onnx_graphs_signature(client):
    capsnet = client.get_model_metadata("capsnet")
    assert capsnet["name"] == "capsnet" and capsnet["versions"] == ["1"]
    assert capsnet["inputs"] == [{"name": "image", "datatype": "FP32", "shape": [-1, 1, 28, 28]}]
    assert [(o["name"], o["datatype"], o["shape"]) for o in capsnet["outputs"]] == CAPSNET_OUTPUT_SIGNATURE
    decoder = client.get_model_metadata("decoder", "1")
    assert [i["name"] for i in decoder["inputs"]] == ["digit", "pose"]
    assert decoder["inputs"][1] == {"name": "pose", "datatype": "FP32", "shape": [-1, 16]}
    assert decoder["outputs"] == [{"name": "reconstruction", "datatype": "FP32", "shape": [-1, 1, 28, 28]}]
    assert _status(lambda: client.get_model_metadata("resnet")) == "404"


@pytest.mark.parametrize("model", MODELS)
def test_config_is_the_generated_one(client, model):
    got = json_format.ParseDict(client.get_model_config(model), mc.ModelConfig(), ignore_unknown_fields=True)
    committed = parse_pbtxt(_pbtxt(model))
    assert got.name == model and got.backend == "python"
    assert list(got.input) == list(committed.input) and list(got.output) == list(committed.output)
    assert got.max_batch_size == committed.max_batch_size
    assert got.HasField("dynamic_batching") == committed.HasField("dynamic_batching")


@pytest.mark.parametrize("binary", [False, True], ids=["json", "binary"])
def test_capsnet_equals_onnxruntime(client, binary):
    x = _digits(4)
    outputs = [triton.InferRequestedOutput(name, binary_data=binary) for name in CAPSNET_OUTPUTS]
    result = client.infer("capsnet", [_image_input(x, binary)], outputs=outputs, request_id="req-7")
    response = result.get_response()
    assert response["id"] == "req-7" and response["model_name"] == "capsnet" and response["model_version"] == "1"
    assert [o["name"] for o in response["outputs"]] == CAPSNET_OUTPUTS
    expected = dict(zip(CAPSNET_OUTPUTS, _session("capsnet").run(CAPSNET_OUTPUTS, {"image": x})))
    for name in CAPSNET_OUTPUTS:
        np.testing.assert_allclose(result.as_numpy(name), expected[name], atol=1e-4, err_msg=name)


@pytest.mark.parametrize("binary", [False, True], ids=["json", "binary"])
def test_decoder_equals_onnxruntime(client, binary):
    rng = np.random.default_rng(16)
    digits = np.array([3, 7, 0], np.int64)
    poses = rng.normal(0, 0.15, (3, 16)).astype(np.float32)
    out = triton.InferRequestedOutput("reconstruction", binary_data=binary)
    got = client.infer("decoder", _decoder_inputs(digits[:, None], poses, binary), outputs=[out]).as_numpy("reconstruction")
    feeds = {i.name: (digits if i.name == "digit" else poses) for i in _session("decoder").get_inputs()}
    expected = _session("decoder").run(["reconstruction"], feeds)[0]
    assert got.shape == (3, 1, 28, 28) and got.dtype == np.float32
    np.testing.assert_allclose(got, expected, atol=1e-4)


def test_errors_are_protocol_errors(client):
    x = np.zeros((2, 1, 27, 28), np.float32)
    assert _status(lambda: client.infer("capsnet", [_image_input(x, True)])) == "400"
    assert _status(lambda: client.infer("resnet", [_image_input(_digits(1), True)])) == "404"


def test_the_front_runs_its_models_on_real_triton(tritonserver):
    """CAPSNET_ENGINE_URL pointed at this tritonserver: the service's own /predict and /reconstruct run there and
    answer as the in-process engine does."""
    from bench.server import Server
    from tests.service.test_remote import _digit_png

    local = Server({"CAPSNET_INTRA_OP_THREADS": "1", "CAPSNET_WARMUP_RUNS": "1", "CAPSNET_PRECISION": "fp32"}).wait_ready()
    front = Server({"CAPSNET_ENGINE_URL": f"http://{tritonserver}", "CAPSNET_WARMUP_RUNS": "1"}).wait_ready(timeout=120)
    try:
        png = _digit_png()
        got, want = (httpx.post(s.url + "/predict", files={"file": ("d.png", png, "image/png")}, timeout=60).json() for s in (front, local))
        assert got["prediction"] == want["prediction"] and got["is_digit"] == want["is_digit"]
        np.testing.assert_allclose(got["lengths"], want["lengths"], atol=1e-4)
        np.testing.assert_allclose(got["recon_errors"], want["recon_errors"], atol=1e-3)
        ready = httpx.get(front.url + "/readyz").json()
        assert ready["status"] == "ready" and ready["provider"] == "remote"
    finally:
        front.stop()
        local.stop()
