"""What a test may find missing on a machine, and the one way a test says so.

Each need has a variable that turns its absence from a skip into a failure; CI sets every one (`.ci/run`), so a CI run
that lacks MNIST, the schemas, a browser or a server fails instead of passing on fewer tests. `missing` is the only
place in the suite that skips (tests/test_skips.py holds every other file to it), and its message names what to install
and the flag.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

import pytest

REPO = Path(__file__).resolve().parent.parent
MNIST = REPO.parent / "shared" / "data" / "mnist"
SCHEMAS = REPO.parent / "shared" / "schemas"

NEEDS = {
    "mnist": "CAPSNET_REQUIRE_MNIST",  # ../shared/data/mnist: accuracy on the test digits, the honesty and pair sets
    "schemas": "CAPSNET_REQUIRE_SCHEMAS",  # ../shared/schemas: compose, KServe, the Open Inference Protocol
    "fonts": "CAPSNET_REQUIRE_FONTS",  # requirements/fonts.txt: the letters of the is_digit sets
    "browser": "CAPSNET_REQUIRE_BROWSER",  # Debian's chromium: the page
    "edge": "CAPSNET_REQUIRE_EDGE",  # Debian's haproxy: the edge
    "containers": "CAPSNET_REQUIRE_CONTAINERS",  # podman and the base images: tests/containers/setup.sh
    "triton": "CAPSNET_REQUIRE_TRITON",  # tritonserver's venv: tests/triton/setup.sh
    "jq": "CAPSNET_REQUIRE_JQ",  # Debian's jq: the README's and docs' curl examples pipe through it
}


def required(need: str) -> bool:
    return os.environ.get(NEEDS[need]) == "1"


def missing(need: str, why: str) -> NoReturn:
    """Skip the test for want of `need`, or fail it where its flag says the machine must have it."""
    flag = NEEDS[need]
    if required(need):
        pytest.fail(f"{why} ({flag}=1)")
    pytest.skip(f"{why} (with {flag}=1 this fails)")


def need_mnist() -> Path:
    if not MNIST.is_dir():
        missing("mnist", f"MNIST not found at {MNIST}")
    return MNIST


def need_schema(name: str) -> Path:
    path = SCHEMAS / name
    if not path.is_file():
        missing("schemas", f"schema not found at {path}")
    return path
