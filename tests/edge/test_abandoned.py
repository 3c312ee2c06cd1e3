"""A client that goes away behind the edge is gone for the service too: HAProxy with deploy/edge/haproxy.cfg passes the
abort on (a reset, or a close after the request as a client that gave up does), so the service drops the work instead
of serving it to nobody. Loopback only, bounded."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator

import httpx
import pytest

from harness.clients import build_request, multipart_png, vanish
from harness.edge import running_edge
from harness.server import Server
from tests.edge.helpers import need_haproxy
from tests.service.helpers import stroke_digit_one

CLIENTS = 40


@pytest.fixture(scope="module")
def edge() -> Iterator[tuple[Server, int]]:
    need_haproxy()
    # one slow model thread, so that requests wait long enough for their clients to leave first
    service = Server({"CAPSNET_INTRA_OP_THREADS": "1", "CAPSNET_WORKERS": "1", "CAPSNET_MAX_BATCH": "1"}).wait_ready()
    try:
        with running_edge(service.port) as port:
            yield service, port
    finally:
        service.stop()


def dropped(service: Server) -> float:
    text = httpx.get(service.url + "/metrics", timeout=10).text
    return sum(float(v) for v in re.findall(r"^capsnet_requests_abandoned_total\{[^}]*\} (\S+)$", text, re.M))


@pytest.mark.parametrize("how", ["after_body", "closed"])
def test_clients_that_leave_through_the_edge_are_dropped_by_the_service(edge, how) -> None:
    service, port = edge
    png = stroke_digit_one(280)
    body, ctype = multipart_png(png)
    request = build_request("127.0.0.1", port, "/predict", body, ctype)
    before = dropped(service)

    async def leave() -> None:
        await asyncio.gather(*(vanish("127.0.0.1", port, request, how, 0.002) for _ in range(CLIENTS)))

    asyncio.run(leave())
    # the service counts a drop once its work on the request stops, which a loaded machine may take a while to reach
    deadline = time.monotonic() + 30
    while dropped(service) - before < CLIENTS / 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert dropped(service) - before >= CLIENTS / 2, f"of {CLIENTS} clients gone, the service dropped {dropped(service) - before}"
    r = httpx.post(f"http://127.0.0.1:{port}/predict", files={"file": ("d.png", png, "image/png")}, timeout=30)
    assert r.status_code == 200 and r.json()["prediction"] == 1
