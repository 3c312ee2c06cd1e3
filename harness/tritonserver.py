"""A real Triton server on loopback: nvidia-pytriton's `tritonserver` binary (its own venv, tests/triton/setup.sh)
serving a copy of deploy/triton/model_repository whose models run their ONNX files in the Python backend.

How the real-Triton tests and the Triton comparison in `make bench` start it, one way for both. The wheel ships the
Python backend only (no ONNX Runtime backend on PyPI), so each config's `backend: "onnxruntime"` becomes
`backend: "python"` with tests/triton/model.py, a stand-in that runs the same model.onnx with onnxruntime; names,
types, dims, max_batch_size, reshape and dynamic batching are the generated ones.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from deploy.triton.config import parse_pbtxt, to_pbtxt
from harness.server import REPO, free_port, proc_stat

COMMITTED = REPO / "deploy" / "triton" / "model_repository"
VENV = Path(os.environ.get("CAPSNET_TRITON_VENV", REPO / ".triton-venv"))
STAND_IN = REPO / "tests" / "triton" / "model.py"
MODELS = tuple(sorted(p.parent.name for p in COMMITTED.glob("*/config.pbtxt")))  # the committed repository's
READY_S = 120


class TritonUnavailable(RuntimeError):
    """The Triton venv is not set up, or the repository has no ONNX files."""


def python_backend_repository(source: Path, out: Path) -> Path:
    """A copy of a generated repository with the ONNX Runtime backend swapped for the stand-in: CPU instances, no
    execution accelerators, everything else (tensors, batching, reshape, warmup) as generated."""
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
        shutil.copyfile(STAND_IN, version / "model.py")
    return out


class TritonServer:
    """`tritonserver` on a free loopback port, HTTP only; `url` is host:port, as tritonclient takes it."""

    def __init__(self, workdir: Path) -> None:
        home = VENV / "tritonserver"
        if not (VENV / ".triton-ready").exists() or not (home / "bin" / "tritonserver").exists():
            raise TritonUnavailable(f"the Triton venv {VENV} is not set up")
        if not all((COMMITTED / m / "1" / "model.onnx").exists() for m in MODELS):
            raise TritonUnavailable(f"{COMMITTED} has no ONNX files")
        repository = python_backend_repository(COMMITTED, workdir / "model_repository")
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
        self.log_path = workdir / "tritonserver.log"
        self._log = self.log_path.open("wb")
        cmd = [
            str(home / "bin" / "tritonserver"),
            f"--model-repository={repository}",
            f"--backend-directory={home / 'backends'}",
            f"--cache-directory={home / 'caches'}",
            "--http-address=127.0.0.1",
            f"--http-port={http}",
            "--allow-grpc=false",
            "--allow-metrics=false",
            f"--backend-config=python,shm-region-prefix-name=capsnet{os.getpid()}{http}",
            "--backend-config=python,shm-default-byte-size=4194304",
            "--exit-timeout-secs=10",
        ]
        self.proc = subprocess.Popen(cmd, env=env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)
        self.url = f"127.0.0.1:{http}"

    def output(self) -> str:
        return self.log_path.read_text()[-4000:]

    def wait_ready(self, timeout: float = READY_S) -> TritonServer:
        import tritonclient.http as triton
        from tritonclient.utils import InferenceServerException

        deadline = time.monotonic() + timeout
        with triton.InferenceServerClient(url=self.url, network_timeout=5) as c:
            while True:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"tritonserver exited ({self.proc.returncode}):\n{self.output()}")
                with contextlib.suppress(InferenceServerException, OSError):  # not listening yet
                    if c.is_server_ready():
                        return self
                if time.monotonic() > deadline:
                    self.stop()
                    raise TimeoutError(f"tritonserver not ready in {timeout} s:\n{self.output()}")
                time.sleep(0.5)

    def cpu_seconds(self) -> float:
        """CPU seconds so far of the server and of its Python backend stubs (its child processes)."""
        total = 0.0
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                parent, cpu = proc_stat(Path(f"/proc/{pid}/stat"))
            except (FileNotFoundError, ProcessLookupError):
                continue
            if self.proc.pid in (int(pid), parent):
                total += cpu
        return total

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self._log.close()
