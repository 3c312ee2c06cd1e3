"""Where the event loop's CPU goes on a request, by phase: py-spy samples the service's main thread under load, and each
sample is put in the phase of the innermost frame that says which phase it is (a numpy or Pillow frame says nothing and
passes it to its caller). The shares, times the loop's CPU a request read from /proc in the same run, are milliseconds a
request (bench/front.py)."""

from __future__ import annotations

import collections
import re
import shutil
import subprocess
import sys
from pathlib import Path

# (phase, pattern on "function (file"), innermost first wins. Sending is matched before the service's middleware, which
# wraps uvicorn's send; the framework and uvicorn last, as everything runs inside them.
RULES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (phase, re.compile(pattern))
    for phase, pattern in (
        ("sending the response", r"^RequestResponseCycle\.send \(uvicorn/"),
        ("building the answer", r"^encode_png \(service/inputs/images\.py"),  # the answer's PNGs, beside the decoding
        ("decoding and preprocessing", r"\(service/inputs/(preprocess|images|uploads|body_to_tensor)\.py"),
        ("the body and multipart", r"\((service/inputs/multipart|service/http/body)\.py|\(multipart/|\(python_multipart/"),
        ("building the answer", r"\((service/postprocess|model/digit_rule|service/engine/card)\.py"),
        ("the hand-off to the batcher and back", r"\((service/engine/batcher|service/threads)\.py"),
        ("metrics", r"\((service/metrics\.py|prometheus_client/)"),
        ("tracing", r"\((service/tracing\.py|opentelemetry/)"),
        (
            "the service's routes, dependencies, middleware and phases (counting, the watcher for vanished clients)",
            r"\(service/(routers/|deps\.py|phases\.py|http/middleware\.py|http/auth\.py|errors\.py|state\.py)",
        ),
        ("the framework: routing, dependencies, validation", r"\((fastapi|starlette|pydantic|pydantic_core|anyio)/"),
        ("HTTP parsing and the connection (uvicorn)", r"\((uvicorn|httptools|h11)/"),
        ("the event loop itself", r"\(asyncio/"),
    )
)
OTHER = "other"
PHASES = (*dict.fromkeys(phase for phase, _ in RULES), OTHER)


def phase_of(frames: list[str]) -> str:
    """frames: outermost first, as py-spy writes them."""
    for frame in reversed(frames):
        for phase, pattern in RULES:
            if pattern.search(frame):
                return phase
    return OTHER


def main_thread_phases(raw: str) -> collections.Counter[str]:
    """py-spy's raw output (`thread (tid): name;frame;...;frame count` a line) -> samples of the main thread by phase."""
    counts: collections.Counter[str] = collections.Counter()
    for line in raw.splitlines():
        stack, _, n = line.rpartition(" ")
        frames = stack.split(";")
        if not frames or "MainThread" not in frames[0] or not n.isdigit():
            continue
        counts[phase_of(frames[1:])] += int(n)
    return counts


def py_spy() -> str | None:
    found = Path(sys.executable).with_name("py-spy")
    return str(found) if found.exists() else shutil.which("py-spy")


def record(pid: int, seconds: float, out: Path, rate: int = 250) -> subprocess.Popen:
    """Start sampling `pid` for `seconds` (nonblocking: the process is not paused to be read); wait on what it returns."""
    exe = py_spy()
    assert exe is not None, "py-spy is not installed (requirements/test.txt)"
    cmd = [exe, "record", "-p", str(pid), "-r", str(rate), "-d", str(max(1, round(seconds))), "-f", "raw", "-o", str(out)]
    return subprocess.Popen([*cmd, "--threads", "--nonblocking"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def table(counts: collections.Counter[str], loop_ms: float) -> list[dict]:
    """Each phase's share of the main thread's samples and its milliseconds of the loop's CPU a request."""
    total = sum(counts.values()) or 1
    return [
        {"phase": p, "share": round(counts[p] / total, 3), "ms_per_request": round(loop_ms * counts[p] / total, 3)}
        for p in PHASES
        if counts[p]
    ]
