"""What the tests that run HAProxy share."""

from __future__ import annotations

from harness.edge import haproxy_binary
from tests.needs import missing


def need_haproxy() -> None:
    """Skip without Debian's `haproxy`, with one line saying what to install; CAPSNET_REQUIRE_EDGE=1 (CI) fails instead."""
    if haproxy_binary() is None:
        missing("edge", "HAProxy is not installed (apt-get install haproxy)")
