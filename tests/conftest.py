"""Shared paths. Tests run from any directory; MNIST (../shared/data/mnist) is optional and only the
committed-accuracy test uses it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

WEIGHTS = REPO / "weights"
MNIST = REPO.parent / "shared" / "data" / "mnist"


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO
