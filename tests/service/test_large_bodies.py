"""The largest hostile bodies a client may send (up to the 16 MiB body limit) are parsed while /healthz keeps answering:
big bodies are parsed in the bounded decode pool, and what a parse must build is bounded first."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from harness.server import Server
from service.settings import Settings
from tests.service.helpers import health_while_decoding
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


@pytest.fixture(scope="module")
def one_decoder() -> Iterator[Server]:
    """One decode thread: two copies of a body sent at once are parsed one after the other, a window twice as wide to
    watch the event loop in."""
    s = Server({"CAPSNET_INTRA_OP_THREADS": "1", "CAPSNET_DECODE_WORKERS": "1"}).wait_ready()
    yield s
    s.stop()


# refused by a bound checked on the way in (the values a JSON body holds, a multipart body's parts, an OIP body's
# declared tensors), by a linear scan in C, before any parse is built: they never reach the decode pool
REFUSED_BEFORE_PARSING = {"a-million-small-keys", "multipart-unclosed", "oip-json-of-many-numbers"}


@pytest.mark.parametrize("name", sorted(set(BODIES) - REFUSED_BEFORE_PARSING))
def test_the_largest_hostile_bodies_are_parsed_off_the_event_loop_while_it_answers(one_decoder, name):
    path, headers, body, status = BODIES[name]

    def send_twice() -> list[int]:
        with ThreadPoolExecutor(2) as pool:
            sent = [pool.submit(httpx.post, one_decoder.url + path, content=body, headers=headers, timeout=120) for _ in range(2)]
            return [f.result().status_code for f in sent]

    # a parse of a few milliseconds may fall between two scrapes, the more often the faster the machine: the bodies are
    # sent again until a /healthz answer is seen between two scrapes that both saw the parse, for up to a minute
    deadline, answered, tries = time.monotonic() + 60.0, 0, 0
    while not answered and (tries < 10 or time.monotonic() < deadline):
        statuses, answered = health_while_decoding(one_decoder.url, send_twice)
        assert statuses == [status, status]
        tries += 1
    assert answered >= 1, f"/healthz answered while the body was being parsed (in none of {tries} tries)"


@pytest.mark.parametrize("name", sorted(REFUSED_BEFORE_PARSING | {"multipart-of-boundary-like-lines"}))
def test_a_large_hostile_body_gets_a_clear_error(server, name):
    path, headers, body, status = BODIES[name]
    r = httpx.post(server.url + path, content=body, headers=headers, timeout=120)
    assert r.status_code == status and r.json()["error"], r.text[:300]
    if not path.startswith("/v2"):  # the protocol's body is {"error": message}; the service's names the kind and says why
        assert r.json()["error"] in {"too_large", "bad_input"} and r.json()["detail"], r.text[:300]
