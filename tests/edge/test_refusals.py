"""What the edge answers itself, in the service's JSON error shape: a service that closes a connection without an answer
(502) or is not there (503), each with Retry-After; and the metrics port (EDGE_METRICS_BIND), which serves GET /metrics
alone to whoever reaches it, while the main port keeps it to the admin network."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

import httpx
import pytest

from harness.edge import running_edge
from harness.server import free_port
from tests.edge.helpers import need_haproxy, raw_request

METRICS = b"capsnet_requests_total 0\n"


class _Upstream(BaseHTTPRequestHandler):
    """Answers /readyz (the edge's start-up check) and /metrics; closes every other request's connection unanswered, as
    a worker killed in the middle of a request does."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        path = unquote(self.path)  # routed as the service routes it: decoded
        if path not in ("/readyz", "/metrics"):
            self.close_connection = True
            return
        body = METRICS if path == "/metrics" else b'{"status":"ready"}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        self.close_connection = True

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def upstream() -> Iterator[ThreadingHTTPServer]:
    need_haproxy()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _refusal(r: httpx.Response, status: int) -> None:
    assert r.status_code == status
    assert r.headers["content-type"] == "application/json" and r.headers["retry-after"] == "1"
    assert r.json()["error"] == "unavailable" and "retry" in r.json()["detail"]


def test_a_service_that_answers_nothing_or_is_gone_gets_json_with_retry_after(upstream) -> None:
    with running_edge(upstream.server_address[1]) as port, httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as c:
        _refusal(c.post("/predict", content=b"{}"), 502)
        upstream.shutdown()
        upstream.server_close()  # the port refuses connections now
        _refusal(c.get("/readyz"), 503)


def test_the_metrics_port_serves_get_metrics_and_nothing_else(upstream) -> None:
    metrics_port = free_port()
    limits = {"EDGE_METRICS_BIND": f"127.0.0.1:{metrics_port}", "EDGE_ADMIN_FROM": "10.9.8.0/24"}  # the tests' client is outside it
    with running_edge(upstream.server_address[1], limits) as port:
        scraped = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=30)
        assert scraped.status_code == 200 and scraped.content == METRICS
        assert raw_request(metrics_port, "GET", "/%6Detrics") == (200, METRICS)
        for method, path in (("GET", "/model"), ("POST", "/v2/repository/index"), ("POST", "/metrics"), ("GET", "/readyz")):
            r = httpx.request(method, f"http://127.0.0.1:{metrics_port}{path}", timeout=30)
            assert r.status_code == 404 and r.json()["error"] == "not_found", (method, path)
        assert httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=30).status_code == 403  # the main port: admin network only
