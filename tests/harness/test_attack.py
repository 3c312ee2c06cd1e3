"""harness.attack against the real edge (HAProxy with deploy/edge/haproxy.cfg, a 1 s header timeout, in front of the real
service): renewed, the attack holds as many connections when it ends as when it began, and it reports every cut."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.attack import LOOPBACK_SOURCES, SlowClients
from harness.edge import running_edge
from harness.server import Server, free_port
from tests.edge.helpers import need_haproxy

PER_PROCESS = 10


@pytest.fixture(scope="module")
def edge_port(server: Server) -> Iterator[int]:
    need_haproxy()
    with running_edge(server.port, {"EDGE_HEADER_TIMEOUT": "1s"}) as port:
        yield port


def test_a_renewed_attack_replaces_each_connection_the_edge_cuts(edge_port):
    with SlowClients(edge_port, 5, slowloris=PER_PROCESS, tricklers=0, renew=True) as attack:
        attack.wait_open()
        assert attack.cpu_seconds() > 0
    cut = [c for c in attack.closed if c.after_s is not None]
    held = [c for c in attack.closed if c.after_s is None]
    assert len(held) == len(LOOPBACK_SOURCES) * PER_PROCESS  # as many open at the end as at the start
    assert len(cut) >= 2 * len(held)  # cut at about 1, 2, 3 and 4 s: at least two generations were replaced
    assert all(c.kind == "slowloris" and c.answer.startswith(b"HTTP/1.1 408") and c.after_s > 0.5 for c in cut), cut[:2]


def test_without_renewal_the_attack_ends_when_the_edge_has_cut_it(edge_port):
    with SlowClients(edge_port, 10, slowloris=PER_PROCESS, tricklers=0) as attack:
        pass
    assert len(attack.closed) == len(LOOPBACK_SOURCES) * PER_PROCESS
    assert all(c.after_s is not None for c in attack.closed), "every connection cut before the attack's 10 s were up"


def test_an_attack_that_cannot_connect_says_so_instead_of_waiting_out_its_time():
    with pytest.raises(RuntimeError, match="could not open"), SlowClients(free_port(), 600, slowloris=1, tricklers=0) as attack:
        attack.wait_open()  # nothing listens on that port
    with pytest.raises(RuntimeError, match="without reporting"), SlowClients(free_port(), 600, slowloris=1, tricklers=0):
        pass
