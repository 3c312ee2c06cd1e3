"""What clients that vanish cost the ones that stay: /predict (a 280x280 PNG, multipart) with the service dropping
abandoned work and serving it to the end (CAPSNET_DROP_ABANDONED=false), side by side on one machine.

- `first_good`: 600 requests each sent whole and its connection reset at once, then one ordinary request: how long it
  waits behind work that nobody will read (the median of 5 rounds).
- `storm`: 4 steady clients for a few seconds, quiet and then while 1,500 clients send a request and vanish (300 reset
  after the body, 300 half-way through it, 300 after the body and a few milliseconds, 600 give up after 1-30 ms).

The clients are NVIDIA Triton's stress clients in spirit (a client killed mid-request, a client with a short timeout),
bounded in count and time, and on loopback only.
"""

from __future__ import annotations

import asyncio
import io
import logging
import random
import time

from PIL import Image

from bench.loadgen import _read_response, run_load
from harness.clients import build_request, multipart_png, vanish
from harness.payloads import digit_pngs
from harness.server import Server

log = logging.getLogger("bench.abandon")
VANISHED = 600  # requests reset after their body before the one ordinary request of `first_good`
STEADY = 4
STORM = {"after_body": 300, "mid_body": 300, "after_body_then_wait": 300, "timeout": 600}


def photo_request(host: str, port: int) -> bytes:
    """POST /predict with an MNIST digit drawn at 280x280, dark on white, as a canvas or a scan would send it."""
    png = digit_pngs(1)[0]
    big = Image.open(io.BytesIO(png)).resize((280, 280), Image.BICUBIC)
    buf = io.BytesIO()
    big.save(buf, "PNG")
    body, ctype = multipart_png(buf.getvalue())
    return build_request(host, port, "/predict", body, ctype)


async def ask(host: str, port: int, request: bytes) -> tuple[int, float]:
    """One ordinary request on a new connection: its status and seconds."""
    t0 = time.perf_counter()
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(request)
        await writer.drain()
        status, _ = await _read_response(reader)
    finally:
        writer.close()
    return status, time.perf_counter() - t0


async def first_good(host: str, port: int, request: bytes, vanished: int = VANISHED, rounds: int = 5) -> dict:
    """`rounds` times: `vanished` requests reset after their body, then one ordinary request, timed (the median is the
    figure: one request's time is at the mercy of the machine)."""
    times, statuses = [], []
    for _ in range(rounds):
        await asyncio.gather(*(vanish(host, port, request, "after_body") for _ in range(vanished)))
        status, seconds = await ask(host, port, request)
        times.append(round(seconds * 1000, 1))
        statuses.append(status)
        await asyncio.sleep(0.5)
    return {"vanished": vanished, "statuses": statuses, "rounds_ms": times, "first_good_ms": sorted(times)[len(times) // 2]}


async def storm(host: str, port: int, request: bytes, seconds: float, mix: dict[str, int] = STORM, seed: int = 0) -> list[asyncio.Task]:
    """The vanishing clients of `mix`, started at random times over `seconds`; returns their tasks."""
    rng = random.Random(seed)
    plan = [(how, rng.uniform(0, seconds)) for how, n in mix.items() for _ in range(n)]

    async def later(how: str, at: float) -> None:
        await asyncio.sleep(at)
        wait = rng.uniform(0.001, 0.030) if how == "timeout" else (rng.uniform(0.001, 0.010) if how == "after_body_then_wait" else 0.0)
        await vanish(host, port, request, how, wait)

    return [asyncio.create_task(later(how, at)) for how, at in plan]


async def _measure_one(host: str, port: int, seconds: float) -> dict:
    request = photo_request(host, port)
    url = f"http://{host}:{port}"
    quiet = (await run_load(url, [request], STEADY, seconds, 5000)).summary()
    tasks = await storm(host, port, request, seconds)
    stormy = (await run_load(url, [request], STEADY, seconds, 5000)).summary()
    await asyncio.gather(*tasks)
    await asyncio.sleep(1.0)  # what the storm left queued drains before the next measure
    first = await first_good(host, port, request)
    return {"quiet": quiet, "storm": stormy, "first_good": first}


def scrape(url: str) -> dict[str, float]:
    """capsnet_requests_abandoned_total by phase, and the in-flight and queue gauges, from /metrics."""
    import urllib.request

    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(("capsnet_requests_abandoned_total{", "capsnet_requests_in_flight ", "capsnet_queue_images ")):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def measure(seconds: float = 5.0) -> dict:
    rows = {}
    for drop in (False, True):
        server = Server({"CAPSNET_DROP_ABANDONED": str(drop).lower()}).wait_ready()
        try:
            row = asyncio.run(_measure_one("127.0.0.1", server.port, seconds))
            row["metrics"] = scrape(server.url)
        finally:
            server.stop()
        rows["dropped" if drop else "served_to_the_end"] = row
        log.info("drop_abandoned=%s: %s", drop, row)
    after, before = rows["dropped"], rows["served_to_the_end"]
    return {
        "request": "POST /predict, a 280x280 PNG digit, multipart",
        "steady_clients": STEADY,
        "storm": STORM,
        "seconds": seconds,
        **rows,
        "storm_p99_over_quiet": {k: round(r["storm"]["p99_ms"] / r["quiet"]["p99_ms"], 2) for k, r in rows.items() if r["quiet"]["p99_ms"]},
        "first_good_ms": {"served_to_the_end": before["first_good"]["first_good_ms"], "dropped": after["first_good"]["first_good_ms"]},
        "quiet_p50_ms": {k: r["quiet"]["p50_ms"] for k, r in rows.items()},
    }
