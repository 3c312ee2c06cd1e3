"""A bounded soak against the real server: mixed good and bad requests, zero 5xx, flat memory."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from bench.loadgen import closed_loop
from bench.soak import alternating, measure
from harness.server import Server


def test_soak_has_no_5xx_and_flat_memory():
    server = Server({"CAPSNET_INTRA_OP_THREADS": "1"}).wait_ready()
    try:
        r = measure(duration_s=12.0, clients=4, server=server)
        assert r["requests"] > 100
        assert r["server_errors_5xx"] == 0, r["statuses"]
        assert set(r["statuses"]) <= {"200", "400", "413", "415", "422"}, r["statuses"]
        good, bad = r["statuses"].get("200", 0), r["requests"] - r["statuses"].get("200", 0)
        assert abs(good - bad) <= 4, r["statuses"]  # every client alternates, so the two kinds are sent as often
        assert r["rss_mb_growth_second_half"] < 25, r["rss_samples"]
        assert server.proc.poll() is None, "server died under the soak"
        assert "Traceback" not in server.stop()
    finally:
        server.stop()


def _sent_by_client(items: list[bytes], clients: int, requests: int) -> dict[int, list[bytes]]:
    """What each client of the load generator sends, in order, when the server answers at once."""
    sent: dict[int, list[bytes]] = {}
    numbers = iter(range(clients))

    @asynccontextmanager
    async def link() -> AsyncIterator:
        me = next(numbers)

        async def send(i: int) -> tuple[int, float]:
            sent.setdefault(me, []).append(items[i])
            await asyncio.sleep(0)
            return 200, 0.0

        yield send

    asyncio.run(closed_loop(link, len(items), clients, 10.0, requests))
    return sent


@pytest.mark.parametrize("clients, n_good, n_bad", [(8, 32, 10), (4, 32, 10), (3, 5, 7), (1, 2, 3)])
def test_each_client_of_the_soak_alternates_a_good_and_a_malformed_request(clients: int, n_good: int, n_bad: int) -> None:
    """As the load generator hands the items out (client k: k, k + clients, ...), for any client count and list sizes."""
    good, bad = [b"g%d" % i for i in range(n_good)], [b"b%d" % i for i in range(n_bad)]
    sent = _sent_by_client(alternating(good, bad, clients), clients, 40 * clients)
    assert len(sent) == clients
    for kinds in sent.values():
        assert len(kinds) >= 2 and [k[:1] for k in kinds] == ([b"g", b"b"] * len(kinds))[: len(kinds)], kinds
