"""The real app on the real weights: a TestClient for API tests, a uvicorn subprocess for server tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from harness.server import Server
from service.app import create_app
from service.settings import Settings


@pytest.fixture(scope="session")
def client() -> Iterator[TestClient]:
    with TestClient(create_app(Settings(intra_op_threads=1, warmup_runs=1))) as c:
        yield c


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    s = Server({"CAPSNET_INTRA_OP_THREADS": "1"}).wait_ready()
    yield s
    s.stop()
