"""The edge serves the service's internals (/metrics, /model) only to EDGE_ADMIN_FROM's network (loopback by
default): every other client gets 403, and everything else as before."""

from __future__ import annotations

import httpx

from harness.edge import start_edge
from harness.server import Server
from tests.edge.helpers import need_haproxy


def test_metrics_and_the_card_only_to_the_admin_network() -> None:
    need_haproxy()
    service = Server({"CAPSNET_INTRA_OP_THREADS": "1"}).wait_ready()
    try:
        for admin, allowed in ((None, True), ("10.9.8.0/24", False)):  # the tests' client is 127.0.0.1
            proc, port = start_edge(service.port, {"EDGE_ADMIN_FROM": admin} if admin else {})
            try:
                with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as c:
                    for path in ("/metrics", "/model"):
                        r = c.get(path)
                        if allowed:
                            assert r.status_code == 200, path
                        else:
                            assert r.status_code == 403 and r.json()["error"] == "forbidden", path
                    assert c.get("/readyz").status_code == 200 and c.get("/").status_code == 200
            finally:
                proc.terminate()
                proc.wait(10)
    finally:
        service.stop()
