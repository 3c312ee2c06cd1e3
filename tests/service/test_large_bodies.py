"""The largest hostile bodies a client may send (up to the 16 MiB body limit) are parsed while /healthz keeps answering
within 250 ms: big bodies are parsed in the bounded decode pool, and what a parse must build is bounded first."""

from __future__ import annotations

import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from service.settings import Settings
from tests.service.test_parsing_time import json_object_of_small_keys, multipart_of, part

LIMIT = Settings.model_fields["max_body_bytes"].default
VALUES = Settings.model_fields["max_json_values"].default
JSON = {"content-type": "application/json"}
FILE = b'form-data; name="file"; filename="a.png"'


def under_limit(unit: bytes, wrap: tuple[bytes, bytes] = (b"", b"")) -> bytes:
    return wrap[0] + unit * ((LIMIT - 1024 - len(wrap[0]) - len(wrap[1])) // len(unit)) + wrap[1]


BODIES = {
    # (path, headers, body, the status it must get)
    "a-million-small-keys": ("/predict", JSON, json_object_of_small_keys(1_000_000), 413),
    "empty-lists-just-under-the-value-limit": ("/predict", JSON, b"[" + b"[]," * (VALUES - 2) + b"[]]", 422),
    "unclosed-string-of-escaped-quotes": ("/predict", JSON, under_limit(b'\\"', (b'{"image": "', b"")), 400),
    "a-base64-string-of-whitespace-runs": ("/predict", JSON, under_limit(b"QUJD \\n", (b'{"image": "', b'"}')), 400),
    "multipart-of-boundary-like-lines": (
        "/predict",
        {"content-type": "multipart/form-data; boundary=xyz"},
        multipart_of([part(FILE, under_limit(b"\r\n--xy\r\n--x"))]),
        400,
    ),
    "multipart-unclosed": ("/predict", {"content-type": "multipart/form-data; boundary=xyz"}, b"--xyz\r\n" + under_limit(b"-"), 400),
    "oip-json-of-many-numbers": (
        "/v2/models/capsnet/infer",
        JSON,
        b'{"inputs": [{"name": "image", "datatype": "FP32", "shape": [1, 1, 28, 28], "data": [' + b"0.5," * (VALUES - 10) + b"0]}]}",
        400,
    ),
    "oip-unclosed-string": ("/v2/models/capsnet/infer", JSON, under_limit(b'\\"', (b'{"id": "', b"")), 400),
}


def test_health_answers_within_250_ms_while_the_largest_hostile_bodies_are_parsed(server):
    latencies: list[float] = []
    answers: dict[str, tuple[int, float]] = {}

    def send_all() -> None:
        with httpx.Client(timeout=120) as c:
            for name, (path, headers, body, _) in BODIES.items():
                t0 = time.perf_counter()
                answers[name] = (c.post(server.url + path, content=body, headers=headers).status_code, time.perf_counter() - t0)

    with ThreadPoolExecutor(1) as pool:
        sender = pool.submit(send_all)
        while not sender.done():
            t0 = time.perf_counter()
            with urllib.request.urlopen(server.url + "/healthz", timeout=30) as r:
                assert r.status == 200
            latencies.append(time.perf_counter() - t0)
            time.sleep(0.01)
        sender.result()
    for name, (_, _, _, status) in BODIES.items():
        assert answers[name][0] == status, (name, answers[name])
    worst = max(latencies)
    assert len(latencies) >= 10 and worst < 0.25, f"/healthz worst {worst * 1000:.0f} ms over {len(latencies)} probes; {answers}"


@pytest.mark.parametrize("name", ["a-million-small-keys", "multipart-of-boundary-like-lines"])
def test_a_large_hostile_body_gets_a_clear_error(server, name):
    path, headers, body, status = BODIES[name]
    r = httpx.post(server.url + path, content=body, headers=headers, timeout=120)
    assert r.status_code == status and r.json()["error"] in {"too_large", "bad_input"}, r.text[:300]
    assert r.json()["detail"], r.text[:300]
