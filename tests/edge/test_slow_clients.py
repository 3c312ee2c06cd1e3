"""Slow clients against the service as it is deployed: the real service behind the real HAProxy with
deploy/edge/haproxy.cfg, attacked from two processes on other loopback addresses (127.0.0.2-6) with thousands
of connections that never finish their headers, and with bodies trickled at 10 bytes a second. /healthz and /predict,
asked from 127.0.0.1, must keep answering, and every attacking connection must be closed by the server within its
timeout. Bounded in count and time; loopback only.

Without HAProxy installed (Debian's `haproxy`) the module skips, unless CAPSNET_REQUIRE_EDGE=1 (CI) makes that a failure.
"""

from __future__ import annotations

import gc
import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from harness.attack import LOOPBACK_SOURCES, SlowClients
from harness.edge import running_edge
from harness.server import Server
from tests.edge.helpers import need_haproxy
from tests.service.helpers import stroke_digit_one

HEADER_TIMEOUT_S = 3
BODY_TIMEOUT_S, BODY_MIN_RATE, DECLARED = 2, 1000, 3000  # a trickled body is refused 2 + 3000/1000 = 5 s in
SLOWLORIS_PER_PROCESS = 1500
TRICKLERS_PER_PROCESS = 20
SLACK_S = 2.0  # the attack goes on this long past the last deadline: every attacker must be cut within it
# How fast the probes are answered under attack is the bench's to say (bench/edge); this test says that they are, while
# every attacking connection is held, and that each attacker is cut, no sooner than its deadline.


@pytest.fixture(scope="module")
def edge() -> Iterator[str]:
    need_haproxy()
    service = Server(
        {
            "CAPSNET_INTRA_OP_THREADS": "1",
            "CAPSNET_BODY_TIMEOUT_S": str(BODY_TIMEOUT_S),
            "CAPSNET_BODY_MIN_RATE": str(BODY_MIN_RATE),
        }
    ).wait_ready()
    try:
        limits = {"EDGE_HEADER_TIMEOUT": f"{HEADER_TIMEOUT_S}s", "EDGE_KEEPALIVE_TIMEOUT": "2s", "EDGE_MAX_CONNECTIONS": "4096"}
        with running_edge(service.port, limits) as port:
            yield f"http://127.0.0.1:{port}"
    finally:
        service.stop()


def test_health_and_predict_answer_under_slowloris_and_trickled_bodies_and_every_attacker_is_cut_off(edge):
    port = int(edge.rsplit(":", 1)[1])
    seconds = max(HEADER_TIMEOUT_S, BODY_TIMEOUT_S + DECLARED / BODY_MIN_RATE) + SLACK_S + 4
    png = stroke_digit_one()
    health: list[int] = []
    predictions: list[int] = []
    gc.collect()
    gc.freeze()  # a full collection over the whole suite's objects, in this process, is not the edge's delay
    try:
        with SlowClients(port, seconds, SLOWLORIS_PER_PROCESS, TRICKLERS_PER_PROCESS, DECLARED) as attack:
            attack.wait_open()
            # a connection of its own for each probe, as a new visitor comes: a full edge would keep it waiting
            with httpx.Client(base_url=edge, timeout=10, limits=httpx.Limits(max_keepalive_connections=0)) as c:
                until = time.monotonic() + seconds - 2
                while time.monotonic() < until:
                    health.append(c.get("/healthz").status_code)
                    assert health[-1] == 200
                    if len(health) % 5 == 0:
                        r = c.post("/predict", files={"file": ("one.png", png, "image/png")})
                        predictions.append(r.status_code)
                        assert r.status_code == 200 and r.json()["prediction"] == 1, r.text[:200]
                    time.sleep(0.05)
    finally:
        gc.unfreeze()
    assert health and predictions, "probes and predictions were answered (each 200, asserted as it came) during the attack"
    conns = attack.closed
    assert len(conns) == len(LOOPBACK_SOURCES) * (SLOWLORIS_PER_PROCESS + TRICKLERS_PER_PROCESS)
    slow = [c for c in conns if c.kind == "slowloris"]
    trickle = [c for c in conns if c.kind == "trickle"]
    never = [c for c in conns if c.after_s is None]
    assert not never, f"{len(never)} attacking connections were never closed, e.g. {never[:2]}"
    body_deadline = BODY_TIMEOUT_S + DECLARED / BODY_MIN_RATE
    assert min(c.after_s for c in slow) >= HEADER_TIMEOUT_S - 0.5, "a slowloris connection was cut before its header timeout"
    # HAProxy 2.6 answers a request whose headers never ended with its built-in 408 page (its errorfiles apply once a
    # request exists); a body cut short is the service's own JSON 408
    assert all(c.answer.startswith(b"HTTP/1.1 408") for c in slow), slow[:2]
    assert min(c.after_s for c in trickle) >= body_deadline - 0.5, "a trickled body was cut before its deadline"
    assert all(c.answer.startswith(b"HTTP/1.1 408") and b"request_timeout" in c.answer for c in trickle), trickle[:2]


def test_one_address_holding_too_many_connections_is_refused_with_429(edge):
    port = int(edge.rsplit(":", 1)[1])
    limit = 64  # EDGE_MAX_CONNECTIONS_PER_CLIENT's default
    held = []
    try:
        for _ in range(limit):
            s = socket.create_connection(("127.0.0.1", port), source_address=("127.0.0.4", 0))
            held.append(s)
        # asked again until the edge has counted the held ones (it counts a connection once it has accepted it, which a
        # busy machine may take a while to do): a bound, not a measure
        for _ in range(50):
            time.sleep(0.2)
            with socket.create_connection(("127.0.0.1", port), source_address=("127.0.0.4", 0)) as s:
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: capsnet\r\nConnection: close\r\n\r\n")
                answer = s.recv(4096)
            if not answer.startswith(b"HTTP/1.1 200"):
                break
        assert answer.startswith(b"HTTP/1.1 429") and b"too_many_connections" in answer, answer[:200]
        assert httpx.get(edge + "/healthz", timeout=5).status_code == 200  # another address is served
    finally:
        for s in held:
            s.close()


def test_an_idle_keep_alive_connection_is_closed(edge):
    port = int(edge.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: capsnet\r\n\r\n")
        assert s.recv(4096).startswith(b"HTTP/1.1 200")
        s.settimeout(60)  # a guard against a hang, not a measure: the edge closes it after its 2 s keep-alive timeout
        t0 = time.monotonic()
        assert s.recv(4096) == b""  # closed by the edge
        assert time.monotonic() - t0 >= 1.5, "not before the keep-alive timeout"
