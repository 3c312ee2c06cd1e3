"""Work nobody waits for is dropped (service/http/middleware.py): clients in the style of NVIDIA Triton's stress tests (reset
after the body, reset half-way through it, gone after a few milliseconds) against the real server on loopback, while
steady clients are served. Behaviour, not speed: `make bench` (bench/abandon.py) measures what the steady clients see."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time

import httpx
import pytest

from harness.clients import build_request, multipart_png, vanish
from tests.service.helpers import stroke_digit_one

MIX = {"after_body": 40, "mid_body": 40, "after_body_then_wait": 40}
TIMEOUTS = 40  # clients that give up after 2-20 ms
STEADY = 4


def scrape(url: str) -> dict[str, float]:
    text = httpx.get(url + "/metrics", timeout=10).text
    values = {}
    for line in text.splitlines():
        if line.startswith("capsnet_") and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values


def predict_counts(values: dict[str, float]) -> dict[str, float]:
    """/predict requests by status, from capsnet_requests_total."""
    out = {}
    for name, v in values.items():
        m = re.fullmatch(r'capsnet_requests_total\{endpoint="/predict",method="POST",status="(\d+)"\}', name)
        if m:
            out[m.group(1)] = v
    return out


def abandoned(values: dict[str, float]) -> dict[str, float]:
    return {m.group(1): v for name, v in values.items() if (m := re.fullmatch(r'capsnet_requests_abandoned_total\{phase="(\w+)"\}', name))}


async def _storm_with_steady_clients(port: int, png: bytes) -> tuple[list[dict], int]:
    body, ctype = multipart_png(png)
    request = build_request("127.0.0.1", port, "/predict", body, ctype)
    url = f"http://127.0.0.1:{port}/predict"
    answers: list[dict] = []
    stop = asyncio.Event()

    async def steady() -> None:
        async with httpx.AsyncClient(timeout=30) as client:
            while not stop.is_set():
                r = await client.post(url, files={"file": ("digit.png", png, "image/png")})
                answers.append({"status": r.status_code, **(r.json() if r.status_code == 200 else {})})

    async def impatient(k: int) -> None:
        async with httpx.AsyncClient(timeout=0.002 + 0.018 * k / TIMEOUTS) as client:
            with contextlib.suppress(httpx.TimeoutException):
                await client.post(url, files={"file": ("digit.png", png, "image/png")})

    steady_tasks = [asyncio.create_task(steady()) for _ in range(STEADY)]
    vanishing = [
        vanish("127.0.0.1", port, request, how, 0.005 if how == "after_body_then_wait" else 0.0) for how, n in MIX.items() for _ in range(n)
    ]
    vanishing += [impatient(k) for k in range(TIMEOUTS)]
    await asyncio.gather(*vanishing)
    stop.set()
    await asyncio.gather(*steady_tasks)
    return answers, len(vanishing)


def test_steady_clients_are_served_right_while_others_vanish_and_nothing_is_left_behind(server) -> None:
    png = stroke_digit_one(280)
    reference = httpx.post(server.url + "/predict", files={"file": ("digit.png", png, "image/png")}, timeout=30).json()
    before = scrape(server.url)
    answers, vanished = asyncio.run(_storm_with_steady_clients(server.port, png))

    assert answers and all(a["status"] == 200 for a in answers), {a["status"] for a in answers}
    assert all(a["prediction"] == reference["prediction"] and a["lengths"] == reference["lengths"] for a in answers)

    deadline = time.monotonic() + 20  # a batch that was running when its clients left finishes, unread
    while True:
        after = scrape(server.url)
        if (after["capsnet_requests_in_flight"] <= 1 and after["capsnet_queue_images"] == 0) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert after["capsnet_requests_in_flight"] == 1, "only the /metrics request itself"
    assert after["capsnet_queue_images"] == 0

    dropped = {k: after_v - before.get(f'capsnet_requests_abandoned_total{{phase="{k}"}}', 0.0) for k, after_v in abandoned(after).items()}
    counts = {k: v - predict_counts(before).get(k, 0.0) for k, v in predict_counts(after).items()}
    assert counts.get("499", 0) == sum(dropped.values()), (counts, dropped)
    # every request that reached the service is answered or counted where it was dropped, and none failed
    assert counts.get("200", 0) >= len(answers) and set(counts) <= {"200", "499"}, counts
    assert sum(counts.values()) <= len(answers) + vanished
    # most clients left before their answer: those that reset half-way through their body, in the body phase
    assert sum(dropped.values()) >= vanished * 0.6, (dropped, vanished)
    assert dropped["body"] >= MIX["mid_body"] * 0.8, dropped


def test_a_request_whose_client_has_gone_is_not_decoded(server) -> None:
    """Sent whole and reset at once, 100 uploads: dropped before the model, as they are counted, and the next ordinary
    request is answered as usual."""
    png = stroke_digit_one(280)
    body, ctype = multipart_png(png)
    request = build_request("127.0.0.1", server.port, "/predict", body, ctype)
    before = scrape(server.url)

    async def burst() -> None:
        await asyncio.gather(*(vanish("127.0.0.1", server.port, request, "after_body") for _ in range(100)))

    asyncio.run(burst())
    r = httpx.post(server.url + "/predict", files={"file": ("digit.png", png, "image/png")}, timeout=30)
    assert r.status_code == 200 and r.json()["prediction"] == 1
    after = scrape(server.url)
    batched = after["capsnet_batch_size_count"] - before["capsnet_batch_size_count"]
    dropped = {k: v - abandoned(before)[k] for k, v in abandoned(after).items()}
    undecoded = dropped["body"] + dropped["preprocess"]
    assert undecoded >= 50, dropped
    # the model ran for the ordinary request and at most for those of the 100 that were not dropped before it
    images = after["capsnet_batch_size_sum"] - before["capsnet_batch_size_sum"]
    assert batched >= 1 and images <= 1 + 100 - undecoded, (images, dropped)


@pytest.fixture(scope="module")
def serving_to_the_end():
    from harness.server import Server

    s = Server({"CAPSNET_INTRA_OP_THREADS": "1", "CAPSNET_DROP_ABANDONED": "false"}).wait_ready()
    yield s
    s.stop()


def test_with_dropping_off_the_work_is_served_to_the_end(serving_to_the_end) -> None:
    """The switch the benchmark uses to show what dropping saves: off, nothing is counted abandoned."""
    png = stroke_digit_one(280)
    body, ctype = multipart_png(png)
    request = build_request("127.0.0.1", serving_to_the_end.port, "/predict", body, ctype)

    async def burst() -> None:
        await asyncio.gather(*(vanish("127.0.0.1", serving_to_the_end.port, request, "after_body") for _ in range(20)))

    before = scrape(serving_to_the_end.url)
    asyncio.run(burst())
    deadline = time.monotonic() + 30
    while (after := scrape(serving_to_the_end.url))["capsnet_requests_in_flight"] > 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert sum(abandoned(after).values()) == 0
    # every request that reached the service ran in the model, for nobody
    served = predict_counts(after).get("200", 0) - predict_counts(before).get("200", 0)
    images = after["capsnet_batch_size_sum"] - before["capsnet_batch_size_sum"]
    assert served >= 10 and images == served, (served, images)
