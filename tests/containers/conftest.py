"""The container tests need an engine and the base images (tests/containers/setup.sh makes both). Without them every
test here skips with one line saying what to run, unless CAPSNET_REQUIRE_CONTAINERS=1 (CI) makes that a failure."""

from __future__ import annotations

import pytest

from tests.containers.engine import CPU_BUILD_ARGS, CPU_IMAGE, Engine, find_engine
from tests.needs import missing


@pytest.fixture(scope="session")
def engine() -> Engine:
    found, why = find_engine()
    if found is None:
        missing("containers", why)
    return found


@pytest.fixture(scope="session")
def cpu_image(engine: Engine) -> str:
    """The CPU image, built from the Dockerfile with the README's build arguments (layers cached by the engine)."""
    engine.build(CPU_IMAGE, CPU_BUILD_ARGS)
    return CPU_IMAGE
