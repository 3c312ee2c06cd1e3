"""Every parser that sees a stranger's bytes takes time linear in them: pathological bodies at sizes n, 4n and 16n.

A quadratic parser (the old JSON depth pre-scan's regex took 25.6 s for 64 KB of escaped quotes) grows 16x from n to
4n and 256x to 16n; these bounds allow 4x over linear for noise and caches, which still leaves a quadratic parser 4x
over its bound at 16n (at 4n it would sit on the bound: that step catches only worse than quadratic). A dict of small
keys gets 8x: 32,000 of them outgrow caches that hold 2,000 (on a 2-core AMD EPYC each key cost 2.5x as much, 40.1x the
time for 16x the keys, with other work on the machine), and a quadratic parser is still 2x over that bound. Each time
is the best of five, the sizes timed in turn, over enough repetitions to last a few milliseconds, so a small input is
not all timer noise, with the garbage collector paused: its full passes cost what the whole test process holds, not
what the parser does."""

from __future__ import annotations

import contextlib
import gc
import io
import struct
import time
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
import orjson
import pytest
from PIL import Image

from service.errors import ClientError
from service.http.body import parse_json
from service.inputs.images import decode_base64, open_image
from service.inputs.multipart import boundary_of, file_parts
from service.oip.codec import ModelSpec, OIPError, parse_request
from service.settings import Settings
from tests.service import helpers

SLACK = 4.0
LIMITS = Settings.model_fields
MAX_VALUES = LIMITS["max_json_values"].default
MAX_PIXELS = LIMITS["max_image_pixels"].default


def seconds(*fns: Callable[[], object]) -> list[float]:
    """The best of five runs of each fn(), each run repeated until it takes at least 5 ms, the functions taken in turn
    round after round: a machine that another process slows for a while slows them all alike, so their ratios hold
    with both cores busy. A refusal (4xx) is a result like any other."""

    def once(fn: Callable[[], object]) -> Callable[[], None]:
        def run() -> None:
            with contextlib.suppress(ClientError, OIPError):
                fn()

        return run

    runs = [once(fn) for fn in fns]
    gc.collect()
    gc.disable()
    try:
        reps = [_repetitions(run) for run in runs]
        best = [float("inf")] * len(runs)
        for _ in range(5):
            for i, (run, n) in enumerate(zip(runs, reps, strict=True)):
                start = time.perf_counter()
                for _ in range(n):
                    run()
                best[i] = min(best[i], (time.perf_counter() - start) / n)
        return best
    finally:
        gc.enable()


def _repetitions(run: Callable[[], None]) -> int:
    """How many calls make a run of at least 5 ms, so a small input is not all timer noise."""
    reps = 1
    while True:
        start = time.perf_counter()
        for _ in range(reps):
            run()
        if time.perf_counter() - start >= 0.005:
            return reps
        reps *= 4


def assert_linear(make: Callable[[int], Any], parse: Callable[[Any], object], n: int, slack: float = SLACK) -> None:
    """make(n), make(4n), make(16n) parsed: no more than linear growth in time, with `slack`."""
    bodies = {k: make(k * n) for k in (1, 4, 16)}
    times = dict(zip(bodies, seconds(*(lambda body=body: parse(body) for body in bodies.values())), strict=True))
    for k in (4, 16):
        assert times[k] <= slack * k * times[1], f"x{k} the input took {times[k] / times[1]:.1f}x the time: {times}"


def json_object_of_small_keys(n: int) -> bytes:
    return b"{" + b",".join(b'"%x":0' % i for i in range(n)) + b"}"


JSON_BODIES: dict[str, Callable[[int], bytes]] = {
    "unclosed-string-of-escaped-quotes": lambda n: b'{"image": "' + b'\\"' * n,
    "run-of-backslashes": lambda n: b'{"image": "' + b"\\\\" * n + b'"',
    "run-of-semicolons-and-quotes": lambda n: b'{"image": "' + b';"' * n,
    "unclosed-nesting": lambda n: b"[" * n,
    "empty-lists": lambda n: b"[" + b"[]," * n + b"[]]",
    "small-keys": json_object_of_small_keys,
    "base64-with-whitespace": lambda n: b'{"image": "' + b"QUJD \\n" * n + b'"}',
}


@pytest.mark.parametrize("make", JSON_BODIES.values(), ids=JSON_BODIES.keys())
def test_json_parsing_is_linear(make):
    # the dict outgrows the caches between n and 16n, and another process's work on the machine shrinks what it has of
    # them: twice the slack, which still leaves a quadratic parser (256x at 16n) twice over the bound
    slack = 2 * SLACK if make is json_object_of_small_keys else SLACK
    assert_linear(make, lambda body: parse_json(body, MAX_VALUES), 2000, slack)


def test_json_past_the_value_limit_is_refused_in_a_count_not_a_parse():
    """A million small keys (16 MB): refused by counting its commas, faster than parsing the largest accepted body."""
    huge, largest = json_object_of_small_keys(1_000_000), json_object_of_small_keys(MAX_VALUES - 1)
    with pytest.raises(ClientError, match="value limit"):
        parse_json(huge, MAX_VALUES)
    refused, parsed = seconds(lambda: parse_json(huge, MAX_VALUES), lambda: parse_json(largest, MAX_VALUES))
    assert refused < parsed


def test_base64_decoding_is_linear():
    assert_linear(lambda n: b"QUJD \n\t" * n, lambda body: decode_base64(body.decode(), 1 << 30), 20_000)


@pytest.fixture(scope="module")
def capsnet_spec() -> ModelSpec:
    return helpers.capsnet_spec()


OIP_BODIES: dict[str, Callable[[int], tuple[bytes, str | None]]] = {
    "unclosed-id-of-escapes": lambda n: (b'{"id": "' + b'\\"' * n, None),
    "data-of-many-numbers": lambda n: (
        orjson.dumps({"inputs": [{"name": "image", "datatype": "FP32", "shape": [n, 1, 28, 28], "data": [0.5] * (n * 784)}]}),
        None,
    ),
    "many-unknown-parameters": lambda n: (orjson.dumps({"parameters": {f"p{i}": i for i in range(n * 100)}, "inputs": []}), None),
    "binary-header-length-of-escapes": lambda n: (b'{"id": "' + b'\\"' * (n * 100), str(n * 200 + 8)),
}


@pytest.mark.parametrize("make", OIP_BODIES.values(), ids=OIP_BODIES.keys())
def test_oip_request_parsing_is_linear(capsnet_spec, make):
    assert_linear(make, lambda made: parse_request(capsnet_spec, *made, MAX_VALUES), 8)


def multipart_of(parts: list[bytes], boundary: bytes = b"xyz") -> bytes:
    return b"".join(b"--" + boundary + b"\r\n" + p for p in parts) + b"--" + boundary + b"--\r\n"


def part(disposition: bytes, data: bytes = b"PIXELS") -> bytes:
    return b"Content-Disposition: " + disposition + b"\r\n\r\n" + data + b"\r\n"


FILE = b'form-data; name="file"; filename="a.png"'
MULTIPART_BODIES: dict[str, Callable[[int], bytes]] = {
    # n parts, each with a header as long as the parser takes (4 KB): what a body can make the header parser do
    "unclosed-quoted-filenames-of-escapes": lambda n: multipart_of([part(b'form-data; name="file"; filename="' + b'\\"' * 2000)] * n),
    "runs-of-semicolons-and-quotes": lambda n: multipart_of([part(b"form-data" + b';"' * 2000)] * n),
    "header-past-the-parsers-limit": lambda n: multipart_of([part(b"form-data; x=" + b"y" * 5000 * n)]),
    "many-empty-parts": lambda n: multipart_of([b"\r\n\r\n"] * (n * 4)),
    # one part, n times longer each time
    "boundary-like-lines-in-data": lambda n: multipart_of([part(FILE, b"\r\n--xy\r\n--x" * n * 1000)]),
    "crlf-runs-in-data": lambda n: multipart_of([part(FILE, b"\r\n" * n * 5000)]),
    "unclosed-body-of-dashes": lambda n: b"--xyz\r\n" + part(FILE, b"-" * n * 10_000),
}


@pytest.mark.parametrize("make", MULTIPART_BODIES.values(), ids=MULTIPART_BODIES.keys())
def test_multipart_parsing_is_linear(make):
    assert_linear(make, lambda body: file_parts(body, "multipart/form-data; boundary=xyz", "file", 64), 4)


CONTENT_TYPES: dict[str, Callable[[int], bytes]] = {
    "unclosed-quoted-boundary-of-escapes": lambda n: b'multipart/form-data; boundary="' + b'\\";' * n,
    "runs-of-semicolons": lambda n: b"multipart/form-data" + b";" * n + b"; boundary=xyz",
    "many-parameters": lambda n: b"multipart/form-data" + b"; a=b" * n + b"; boundary=xyz",
}


@pytest.mark.parametrize("make", CONTENT_TYPES.values(), ids=CONTENT_TYPES.keys())
def test_content_type_parameters_are_parsed_in_linear_time(make):
    assert_linear(make, lambda header: boundary_of(header.decode("latin-1")), 1000)


def png_of_many_chunks(n: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = chunk(b"IHDR", struct.pack(">IIBBBBB", 28, 28, 8, 0, 0, 0, 0))
    idat = chunk(b"IDAT", zlib.compress(b"\x00" * 29 * 28))
    return b"\x89PNG\r\n\x1a\n" + ihdr + chunk(b"tEXt", b"k\x00v") * n + chunk(b"zzZz", b"") * n + idat + chunk(b"IEND", b"")


def jpeg_of_many_segments(n: int) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(np.zeros((28, 28), np.uint8)).save(buf, "JPEG")
    jpeg = buf.getvalue()
    com = b"\xff\xfe" + struct.pack(">H", 6) + b"abcd"
    return jpeg[:2] + com * n + jpeg[2:]


@pytest.mark.parametrize("make", [png_of_many_chunks, jpeg_of_many_segments], ids=["png-chunks", "jpeg-segments"])
def test_image_headers_are_read_in_linear_time(make):
    assert_linear(make, lambda data: open_image(data, MAX_PIXELS), 200)
