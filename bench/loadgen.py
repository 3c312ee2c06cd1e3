"""A small HTTP/1.1 keep-alive load generator on asyncio streams, bounded in count and time.

Why not httpx: on a 2-core machine the client shares the CPU with the server, and a full HTTP
client spends ~1 ms of CPU a request; sending pre-built request bytes (harness.clients) costs a few microseconds.
Only ever pointed at loopback.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import numpy as np

from harness.clients import LOOPBACK


@dataclass
class Result:
    latencies: list[float] = field(default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)
    errors: int = 0  # connection-level failures
    seconds: float = 0.0

    def summary(self) -> dict:
        lat = np.array(self.latencies) * 1000.0
        ok = sum(v for k, v in self.statuses.items() if 200 <= k < 300)
        pct = (lambda q: round(float(np.percentile(lat, q)), 3)) if len(lat) else (lambda q: None)
        return {
            "requests": len(self.latencies),
            "ok": ok,
            "statuses": {str(k): v for k, v in sorted(self.statuses.items())},
            "errors": self.errors + (len(self.latencies) - ok),
            "seconds": round(self.seconds, 3),
            "throughput_rps": round(len(self.latencies) / self.seconds, 2) if self.seconds else 0.0,
            "p50_ms": pct(50),
            "p95_ms": pct(95),
            "p99_ms": pct(99),
            "mean_ms": round(float(lat.mean()), 3) if len(lat) else None,
        }


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, bool]:
    """(status, whether the server will close the connection)."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    length, close = 0, False
    for line in lines[1:]:
        k, _, v = line.partition(":")
        k = k.strip().lower()
        if k == "content-length":
            length = int(v.strip())
        elif k == "connection" and v.strip().lower() == "close":
            close = True
    await reader.readexactly(length)
    return status, close


Send = Callable[[int], Awaitable[tuple[int, float] | None]]  # item i sent: its status and latency, or None: the link failed


async def closed_loop(
    connect: Callable[[], AbstractAsyncContextManager[Send]], items: int, concurrency: int, duration_s: float, max_requests: int
) -> Result:
    """`concurrency` clients, each on a link of its own (`connect`), sending the items in turn back to back until the
    time or the count runs out: the one closed loop behind both load generators, HTTP/1.1 here and gRPC (bench/grpc.py)."""
    res = Result()
    deadline = time.perf_counter() + duration_s
    sent = 0

    async def client(k: int) -> None:
        nonlocal sent
        async with connect() as send:
            i = k
            while time.perf_counter() < deadline and sent < max_requests:
                sent += 1
                answer = await send(i % items)
                i += concurrency
                if answer is None:
                    res.errors += 1
                    continue
                status, seconds = answer
                res.latencies.append(seconds)
                res.statuses[status] = res.statuses.get(status, 0) + 1

    start = time.perf_counter()
    await asyncio.gather(*(client(k) for k in range(concurrency)))
    res.seconds = time.perf_counter() - start
    return res


async def run_load(url: str, requests: list[bytes], concurrency: int, duration_s: float, max_requests: int) -> Result:
    """`concurrency` keep-alive connections each send requests back to back until the time or count runs out."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    if host not in LOOPBACK:
        raise ValueError(f"load generator only targets loopback, not {host}")

    @asynccontextmanager
    async def connection() -> AsyncIterator[Send]:
        reader, writer = await asyncio.open_connection(host, port)

        async def send(i: int) -> tuple[int, float] | None:
            nonlocal reader, writer
            t0 = time.perf_counter()
            try:
                writer.write(requests[i])
                await writer.drain()
                status, close = await _read_response(reader)
            except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError, IndexError):
                writer.close()
                reader, writer = await asyncio.open_connection(host, port)
                return None
            seconds = time.perf_counter() - t0
            if close:
                writer.close()
                reader, writer = await asyncio.open_connection(host, port)
            return status, seconds

        try:
            yield send
        finally:
            writer.close()

    return await closed_loop(connection, len(requests), concurrency, duration_s, max_requests)


def load(url: str, requests: list[bytes], concurrency: int, duration_s: float, max_requests: int) -> Result:
    """run_load on uvloop when it is installed (uvicorn[standard] brings it): the client shares the cores with
    the server, and every microsecond it spends is one the server does not get."""
    coro = run_load(url, requests, concurrency, duration_s, max_requests)
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)
