"""A bounded fuzzing run of every function that parses a stranger's bytes: whatever comes in, the answer is a value or a
client error (a 4xx), never another exception (a 500). Inputs mix random bytes with fragments of the real syntax, so the
search reaches past the first byte a parser checks."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.errors import ClientError
from service.http.body import parse_json
from service.inputs.images import decode_base64, open_image
from service.inputs.multipart import boundary_of, file_parts
from service.oip.codec import ModelSpec, OIPError, parse_request
from tests.service import helpers
from tests.service.helpers import stroke_digit_one

FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def spliced(*fragments: bytes) -> st.SearchStrategy[bytes]:
    return st.lists(st.one_of(st.binary(max_size=16), st.sampled_from(fragments)), max_size=24).map(b"".join)


JSON_BYTES = spliced(b"{", b"}", b"[", b"]", b'"', b"\\", b'\\"', b"\\u00", b":", b",", b"1e999", b"-0.5", b"NaN", b"true", b"\xff")
MULTIPART_BYTES = spliced(
    b"--xyz", b"--xyz--", b"\r\n", b"\r\n\r\n", b"Content-Disposition: form-data", b'; name="file"', b'; filename="a.png"', b";", b'"'
)
PNG = stroke_digit_one(28)


@FUZZ
@given(JSON_BYTES)
def test_json_parsing_answers_a_value_or_a_4xx(data):
    try:
        parse_json(data, 1024)
    except ClientError as e:
        assert 400 <= e.status < 500


@FUZZ
@given(MULTIPART_BYTES, st.sampled_from(["multipart/form-data; boundary=xyz", 'multipart/form-data; boundary="xyz"']))
def test_multipart_parsing_answers_files_or_a_4xx(body, content_type):
    try:
        files = file_parts(body, content_type, "file", 4)
        assert 1 <= len(files) <= 4
    except ClientError as e:
        assert 400 <= e.status < 500


@FUZZ
@given(st.text(max_size=80))
def test_content_type_parsing_answers_a_boundary_or_a_4xx(content_type):
    try:
        assert 1 <= len(boundary_of(content_type)) <= 70
    except ClientError as e:
        assert e.status == 400


@FUZZ
@given(st.text(st.sampled_from("QUJDZA=+/ \n\t:;,data:image/png;base64"), max_size=64))
def test_base64_decoding_answers_bytes_or_a_4xx(text):
    try:
        decode_base64(text, 1 << 20)
    except ClientError as e:
        assert 400 <= e.status < 500


@FUZZ
@given(st.data())
def test_image_header_reading_answers_an_image_or_a_4xx(data):
    """A real PNG with bytes flipped, cut or inserted anywhere, including its header and chunk lengths."""
    blob = bytearray(PNG)
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(blob) - 1))
        action = data.draw(st.sampled_from(["flip", "cut", "insert"]))
        if action == "flip":
            blob[at] = data.draw(st.integers(0, 255))
        elif action == "cut":
            del blob[at:]
            if not blob:
                break
        else:
            blob[at:at] = data.draw(st.binary(min_size=1, max_size=8))
    try:
        open_image(bytes(blob), 16_000_000)
    except ClientError as e:
        assert e.status in (400, 413)


@pytest.fixture(scope="module")
def capsnet_spec() -> ModelSpec:
    return helpers.capsnet_spec()


OIP_FRAGMENTS = spliced(
    b'{"inputs": [{"name": "image", "datatype": "FP32", "shape": [1, 1, 28, 28], ',
    b'"data": [',
    b"0.5, ",
    b"]}]",
    b'"parameters": {"binary_data_size": 3136}',
    b'"outputs": [{"name": "lengths"}]',
    b'"datatype": "BYTES"',
    b"}",
    b",",
)


@FUZZ
@given(OIP_FRAGMENTS, st.one_of(st.none(), st.integers(-2, 400).map(str), st.text(max_size=6)))
def test_oip_request_parsing_answers_a_request_or_a_4xx(capsnet_spec, body, header_length):
    try:
        parse_request(capsnet_spec, body, header_length, 1024)
    except (OIPError, ClientError) as e:
        assert 400 <= getattr(e, "status", 400) < 500
