"""A bounded soak: several clients send good and bad requests for a fixed time; count 5xx, watch memory."""

from __future__ import annotations

import threading
import time

from bench.loadgen import load
from harness.payloads import bad_requests, predict_requests, reconstruct_requests
from harness.server import Server


def alternating(good: list[bytes], bad: list[bytes], clients: int) -> list[bytes]:
    """The soak's requests in the order each client alternates a good and a malformed one: the load generator hands
    client k the items k, k + clients, k + 2 * clients and so on, so the two kinds go in blocks of `clients`."""
    rounds = max(1, -(-len(good) // clients))
    items: list[bytes] = []
    for r in range(rounds):
        for kind in (good, bad):
            items += [kind[(r * clients + k) % len(kind)] for k in range(clients)]
    return items


def measure(duration_s: float = 60.0, clients: int = 8, env: dict[str, str] | None = None, server: Server | None = None) -> dict:
    own = server is None
    server = server or Server(env).wait_ready()
    try:
        host, port = "127.0.0.1", server.port
        good = predict_requests(host, port, 16) + reconstruct_requests(host, port, 16)
        bad = bad_requests(host, port)
        mixed = alternating(good, bad, clients)
        # settle: first requests allocate the arenas that later ones reuse
        load(server.url, mixed, clients, min(5.0, duration_s / 4), 10**6)
        rss: list[tuple[float, float]] = []
        stop = threading.Event()

        def sample() -> None:
            t0 = time.perf_counter()
            while not stop.is_set():
                rss.append((round(time.perf_counter() - t0, 1), round(server.rss_mb(), 1)))
                stop.wait(1.0)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        res = load(server.url, mixed, clients, duration_s, 10**7).summary()
        stop.set()
        sampler.join()
        rss.append((round(duration_s, 1), round(server.rss_mb(), 1)))
        five = sum(v for k, v in res["statuses"].items() if k.startswith("5"))
        mem = [m for _, m in rss]
        half = mem[len(mem) // 2 :]
        return {
            "duration_s": duration_s,
            "clients": clients,
            **res,
            "server_errors_5xx": five,
            "rss_mb_start": mem[0],
            "rss_mb_end": mem[-1],
            "rss_mb_max": max(mem),
            "rss_mb_growth_second_half": round(max(half) - half[0], 1),
            "rss_samples": rss,
        }
    finally:
        if own:
            server.stop()
