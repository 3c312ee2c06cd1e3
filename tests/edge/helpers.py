"""What the tests that run HAProxy share."""

from __future__ import annotations

import os

import pytest

from harness.edge import haproxy_binary


def need_haproxy() -> None:
    """Skip without Debian's `haproxy`, with one line saying what to install; CAPSNET_REQUIRE_EDGE=1 (CI) fails instead."""
    if haproxy_binary() is None:
        why = "HAProxy is not installed (apt-get install haproxy)"
        if os.environ.get("CAPSNET_REQUIRE_EDGE") == "1":
            pytest.fail(f"{why} and CAPSNET_REQUIRE_EDGE=1")
        pytest.skip(f"{why}: the edge tests skip")
