"""Every example a reader copies from the README and docs/ runs against the real service: each `curl` line of their sh
blocks through bash (with jq, as written, the address made the test server's), and each Python block that talks to
the service (tritonclient over HTTP and gRPC). A command must succeed and print something that is not `null`: an
example that has drifted from the service fails here, not in a reader's shell.

The pictures the examples name (digit.png, two.png, a.png, b.png) are drawn here, as a person's digits on paper."""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.needs import missing
from tests.service.oip.test_grpc_server import GrpcServer
from tests.static.test_page import digit_png

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
ADDRESS, GRPC_ADDRESS = "127.0.0.1:8000", "127.0.0.1:8001"


def _blocks(path: Path, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", path.read_text(), re.M | re.S)


def _curl_commands() -> list[tuple[str, str]]:
    """(where, command) for each curl line of every sh block, continuation lines joined; the lines that start the
    service itself (make run) are the reader's, not examples of the API."""
    found = []
    for path in DOCS:
        for block in _blocks(path, "sh"):
            for n, command in enumerate(block.replace("\\\n", " ").splitlines()):
                if "curl " in command and "make run" not in command:
                    found.append((f"{path.relative_to(REPO)}:{n}", command))
    return found


def _python_examples() -> list[tuple[str, str]]:
    return [
        (f"{path.relative_to(REPO)}:{i}", block)
        for path in DOCS
        for i, block in enumerate(_blocks(path, "python"))
        if ADDRESS in block or GRPC_ADDRESS in block
    ]


SEVEN = [[(0.26, 0.18), (0.74, 0.18), (0.58, 0.50), (0.44, 0.86)]]
ONE = [[(0.30, 0.14), (0.29, 0.86)]]
ZERO = [[(0.62 + 0.2 * math.sin(t / 8), 0.5 - 0.33 * math.cos(t / 8)) for t in range(52)]]


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[tuple[GrpcServer, Path]]:
    where = tmp_path_factory.mktemp("reader")
    (where / "digit.png").write_bytes(digit_png(SEVEN))
    (where / "a.png").write_bytes(digit_png(SEVEN))
    (where / "b.png").write_bytes(digit_png(ONE))
    (where / "two.png").write_bytes(digit_png(ONE + ZERO))
    server = GrpcServer({"CAPSNET_INTRA_OP_THREADS": "1"}).wait_ready()
    yield server, where
    server.stop()


def test_the_docs_have_examples_to_run() -> None:
    assert len(_curl_commands()) >= 15 and len(_python_examples()) >= 3


@pytest.mark.parametrize("where, command", _curl_commands(), ids=[w for w, _ in _curl_commands()])
def test_each_curl_example_runs(served, where: str, command: str) -> None:
    if shutil.which("jq") is None:
        missing("jq", "jq is not installed (apt-get install jq): the examples pipe through it")
    server, cwd = served
    done = subprocess.run(
        ["bash", "-o", "pipefail", "-c", command.replace(ADDRESS, f"127.0.0.1:{server.port}")],
        cwd=cwd, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, f"{where}: {command}\n{done.stderr[-1500:]}"
    written = re.search(r">\s*(\S+\.png)\s*$", command)
    if written:
        assert (cwd / written.group(1)).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{where}: not a PNG"
    else:
        assert done.stdout.strip() and "null" not in done.stdout, f"{where}: {command}\n{done.stdout[:500]}"


@pytest.mark.parametrize("where, code", _python_examples(), ids=[w for w, _ in _python_examples()])
def test_each_python_example_runs(served, where: str, code: str) -> None:
    server, cwd = served
    code = code.replace(ADDRESS, f"127.0.0.1:{server.port}").replace(GRPC_ADDRESS, server.grpc_url)
    done = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{where}\n{done.stderr[-1500:]}"
    assert done.stdout.strip(), where
