"""The container engine, one way for the container tests and the benchmark of image builds: Docker where one answers,
else podman set up by tests/containers/setup.sh, so that both build and run the images with the same commands the
README gives a user and with the same engine found the same way.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

from harness.server import REPO

WORK = REPO / ".containers"
CONF = WORK / "containers.conf"
PODMAN_COMPOSE = WORK / "venv" / "bin" / "podman-compose"
# what the README's commands build and the compose file names
CPU_IMAGE = "capsnet-serve:cpu"
CPU_BUILD_ARGS = {"BASE_IMAGE": "python:3.11-slim-bookworm", "ORT_REQUIREMENTS": "requirements/ort-cpu.txt"}
# the GPU build path's stand-in base: no python3, as nvidia/cuda has none (setup.sh)
NO_PYTHON_BASE = "localhost/capsnet-test/no-python:bookworm"
GPU_PATH_IMAGE = "capsnet-serve:gpu-path"  # the GPU flavour built on NO_PYTHON_BASE
BASES = ("python:3.11-slim-bookworm", "haproxy:2.6", NO_PYTHON_BASE)
SETUP = "tests/containers/setup.sh"


@dataclass
class Engine:
    cli: str  # "docker" or "podman"
    env: dict[str, str]

    def __call__(self, *args: str, timeout: float = 900, check: bool = True) -> subprocess.CompletedProcess[str]:
        p = subprocess.run([self.cli, *args], env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and p.returncode != 0:
            raise RuntimeError(f"{self.cli} {' '.join(args)} exited {p.returncode}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
        return p

    def build(self, tag: str, build_args: dict[str, str], cache: bool = True) -> float:
        """`docker build` as the README gives it (podman: in Docker's image format, which keeps HEALTHCHECK); seconds taken."""
        fmt = ["--format", "docker"] if self.cli == "podman" else []
        args = [a for k, v in build_args.items() for a in ("--build-arg", f"{k}={v}")]
        t0 = time.monotonic()
        self("build", *fmt, *([] if cache else ["--no-cache"]), "-t", tag, *args, str(REPO), timeout=1800)
        return time.monotonic() - t0

    def inspect(self, what: str) -> dict:
        return json.loads(self("inspect", what).stdout)[0]

    def image_healthcheck(self, image: str) -> dict | None:
        """An image's HEALTHCHECK (Docker keeps it in Config, podman beside it)."""
        found = json.loads(self("image", "inspect", image).stdout)[0]
        return found["Config"].get("Healthcheck") or found.get("Healthcheck")

    def healthy(self, container: str, timeout: float = 90) -> bool:
        """The image's own HEALTHCHECK passes. podman 4.3 runs healthchecks from systemd timers, which this machine lacks:
        `podman healthcheck run` runs the same command once, by hand. Docker runs them itself: wait for "healthy"."""
        if self.cli == "podman":
            return self("healthcheck", "run", container, check=False).returncode == 0
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.inspect(container)["State"].get("Health", {}).get("Status") == "healthy":
                return True
            time.sleep(1)
        return False

    def compose(
        self, *args: str, project: str, env: dict[str, str] | None = None, timeout: float = 900
    ) -> subprocess.CompletedProcess[str]:
        """The compose file as the README runs it: `docker compose`, or podman-compose where podman is the engine."""
        cmd = ["docker", "compose"] if self.cli == "docker" else [str(PODMAN_COMPOSE)]
        e = {**self.env, "BUILDAH_FORMAT": "docker", **(env or {})}
        p = subprocess.run([*cmd, "-p", project, *args], cwd=REPO, env=e, capture_output=True, text=True, timeout=timeout)
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} {' '.join(args)} exited {p.returncode}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
        return p

    def logs(self, container: str) -> str:
        p = self("logs", container, check=False)
        return p.stdout + p.stderr

    def settings(self, container: str) -> dict:
        """The settings the service in `container` parsed from what it was given (its own Settings class, in the container)."""
        code = "from service.settings import Settings; print(Settings().model_dump_json())"
        return json.loads(self("exec", container, "python", "-c", code).stdout)

    def process_uid(self, container: str) -> int:
        """The real uid of the container's main process, from the kernel (not the image's USER line)."""
        status = self("exec", container, "cat", "/proc/1/status").stdout
        return int(next(line.split()[1] for line in status.splitlines() if line.startswith("Uid:")))


def find_engine() -> tuple[Engine | None, str]:
    """The engine to use and, when there is none, one line saying why and what to run."""
    base_env = {**os.environ}
    if shutil.which("docker"):
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            if subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0:
                return Engine("docker", base_env), ""
    if not shutil.which("podman"):
        return None, f"no container engine (no Docker engine answers, podman is not installed): run {SETUP}"
    if not CONF.exists() or not PODMAN_COMPOSE.exists():
        return None, f"podman is not set up for the tests (no {CONF.relative_to(REPO)} or podman-compose): run {SETUP}"
    engine = Engine("podman", {**base_env, "CONTAINERS_CONF": str(CONF)})
    missing = [b for b in BASES if engine("image", "exists", b, check=False).returncode != 0]
    if missing:
        return None, f"base images {missing} are missing: run {SETUP}"
    return engine, ""


def wait_ready(url: str, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/readyz", timeout=2) as r:
                return json.loads(r.read())
        except (urllib.error.URLError, OSError, ValueError) as e:
            last = e
        time.sleep(0.25)
    raise TimeoutError(f"{url}/readyz not ready within {timeout} s: {last}")
