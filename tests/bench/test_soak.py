"""A bounded soak against the real server: mixed good and bad requests, zero 5xx, flat memory."""

from __future__ import annotations

from bench.soak import measure
from harness.server import Server


def test_soak_has_no_5xx_and_flat_memory():
    server = Server({"CAPSNET_INTRA_OP_THREADS": "1"}).wait_ready()
    try:
        r = measure(duration_s=12.0, clients=4, server=server)
        assert r["requests"] > 100
        assert r["server_errors_5xx"] == 0, r["statuses"]
        assert set(r["statuses"]) <= {"200", "400", "413", "415", "422"}, r["statuses"]
        assert r["rss_mb_growth_second_half"] < 25, r["rss_samples"]
        assert server.proc.poll() is None, "server died under the soak"
        assert "Traceback" not in server.stop()
    finally:
        server.stop()
