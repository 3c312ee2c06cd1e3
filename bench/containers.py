"""Container images as a user builds them: the Dockerfile's CPU image and its GPU build path, built cold (no
layer cache), warm (nothing changed) and after a change to the service code only, with their sizes and the seconds
from `run` to /readyz. The engine (harness.containers) is Docker where one answers, else podman set up by
tests/containers/setup.sh; without either the part reports that and measures nothing.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Iterator

from harness.containers import BASES, CPU_BUILD_ARGS, CPU_IMAGE, GPU_PATH_IMAGE, NO_PYTHON_BASE, Engine, find_engine, wait_ready
from harness.server import REPO, free_port

log = logging.getLogger("bench.containers")
IMAGES = {"cpu": (CPU_IMAGE, CPU_BUILD_ARGS), "gpu build path": (GPU_PATH_IMAGE, {"BASE_IMAGE": NO_PYTHON_BASE})}


def image_size_mb(engine: Engine, image: str) -> float:
    return round(json.loads(engine("image", "inspect", image).stdout)[0]["Size"] / 1e6, 1)


@contextlib.contextmanager
def service_code_changed() -> Iterator[None]:
    """One line added to service/__init__.py for the build inside (a warm build after a code change), then put back."""
    path = REPO / "service" / "__init__.py"
    text = path.read_text()
    path.write_text(text + f"# bench.containers {time.time()}\n")
    try:
        yield
    finally:
        path.write_text(text)


def seconds_to_ready(engine: Engine, image: str) -> float:
    """From `run` to /readyz answering 200."""
    name, port = "capsnet-bench-ready", free_port()
    engine("rm", "-f", name, check=False)
    t0 = time.monotonic()
    engine("run", "-d", "--name", name, "-p", f"127.0.0.1:{port}:8000", image)
    try:
        wait_ready(f"http://127.0.0.1:{port}", timeout=180)
        return round(time.monotonic() - t0, 2)
    finally:
        engine("rm", "-f", "-t", "2", name, check=False)


def measure() -> dict:
    engine, why = find_engine()
    if engine is None:
        log.warning("containers: %s", why)
        return {"skipped": why}
    rows = []
    for flavour, (tag, args) in IMAGES.items():
        log.info("containers: %s image, cold build", flavour)
        cold = engine.build(tag, args, cache=False)
        warm = engine.build(tag, args)
        with service_code_changed():
            code = engine.build(tag, args)
        engine.build(tag, args)  # the committed tree's image again
        rows.append(
            {
                "image": flavour,
                "tag": tag,
                "build_args": args,
                "size_mb": image_size_mb(engine, tag),
                "cold_build_s": round(cold, 1),
                "warm_build_s": round(warm, 1),
                "code_change_build_s": round(code, 1),
                "run_to_ready_s": seconds_to_ready(engine, tag),
            }
        )
    bases = {b: image_size_mb(engine, b) for b in BASES}
    version = engine("version", "--format", "{{.Client.Version}}").stdout.strip()
    when = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    return {"engine": f"{engine.cli} {version}", "base_images_mb": bases, "rows": rows, "when": when}
