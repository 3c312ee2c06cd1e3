"""Uploads as browsers and HTTP clients encode them come back byte for byte; broken bodies are a 400, never a crash."""

from __future__ import annotations

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.errors import BadInput, Invalid
from service.inputs.multipart import file_parts

# Part data that looks like the framing: line breaks, dashes, a near-boundary, a header block.
TRICKY = st.sampled_from([b"", b"\r\n", b"--", b"\r\n--", b"\r\n\r\n", b"Content-Disposition: x\r\n\r\n", b"\x89PNG\r\n\x1a\n"])
DATA = st.lists(st.one_of(st.binary(max_size=64), TRICKY), max_size=6).map(b"".join)
NAMES = st.text(st.characters(min_codepoint=32, max_codepoint=126), min_size=1, max_size=20)


def encode(files: list[tuple[str, str | None, bytes]]) -> tuple[bytes, str]:
    """A body as httpx (like a browser) writes it: (field, filename or None for a text field, data)."""
    req = httpx.Request("POST", "http://test/", files=[(f, (n, d, "image/png" if n else None)) for f, n, d in files])
    return req.read(), req.headers["content-type"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["file", "other", "File"]), st.one_of(st.none(), NAMES), DATA), min_size=1, max_size=5))
def test_every_file_in_the_field_comes_back_intact_and_in_order_and_any_other_part_is_named(parts):
    body, ctype = encode(parts)
    others = [f for f, n, _ in parts if f != "file" or n is None]
    if others:  # another field, or text in the file's: refused by its name, not ignored
        with pytest.raises(Invalid, match=f"field '{others[0]}'"):
            file_parts(body, ctype, "file", 10)
    else:
        assert file_parts(body, ctype, "file", 10) == [d for _, _, d in parts]


def test_an_option_sent_as_a_form_field_or_text_in_the_file_field_is_a_422_that_says_where_each_goes():
    body, ctype = encode([("file", "a.png", b"1"), ("include", None, b"routing")])
    with pytest.raises(Invalid) as e:
        file_parts(body, ctype, "file", 1)
    assert str(e.value) == "multipart field 'include' is not taken: the image goes in field 'file', options in the query string"
    body, ctype = encode([("file", None, b"digit.png")])
    with pytest.raises(Invalid) as e:
        file_parts(body, ctype, "file", 1)
    assert str(e.value) == "field 'file' holds text, not a file: send the image as a file (curl -F file=@digit.png)"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.just("file"), NAMES, DATA), min_size=1, max_size=3), st.data())
def test_a_body_cut_short_anywhere_is_a_400(parts, data):
    body, ctype = encode(parts)
    close = body.rindex(b"--\r\n")  # the close delimiter's "--": any cut before it loses the end of the body
    cut = data.draw(st.integers(0, close))
    with pytest.raises(BadInput, match="malformed multipart"):
        file_parts(body[:cut], ctype, "file", 10)


def test_header_case_and_an_epilogue_are_accepted():
    body = (
        b'--xyz\r\ncontent-disposition: form-data; NAME="file"; filename="a;b.png"\r\n'
        b"Content-Type: image/png\r\n\r\nPIXELS\r\n--xyz--\r\nan epilogue"
    )
    assert file_parts(body, 'multipart/form-data; boundary="xyz"', "file", 1) == [b"PIXELS"]


@pytest.mark.parametrize("body", [b"a preamble\r\n--xyz\r\n", b"--xyz  \r\n"], ids=["preamble", "transport-padding"])
def test_what_browsers_never_send_is_refused_as_starlette_refuses_it(body):
    body += b'Content-Disposition: form-data; name="file"; filename="a.png"\r\n\r\nPIXELS\r\n--xyz--\r\n'
    with pytest.raises(BadInput, match="malformed multipart"):
        file_parts(body, "multipart/form-data; boundary=xyz", "file", 1)


def test_a_quoted_field_name_may_hold_separators_and_escaped_quotes():
    body = b'--xyz\r\nContent-Disposition: form-data; name="fi;le"; filename="say \\"hi\\".png"\r\n\r\nPIXELS\r\n--xyz--\r\n'
    assert file_parts(body, "multipart/form-data; boundary=xyz", "fi;le", 1) == [b"PIXELS"]


def test_more_files_than_the_limit_is_a_422_naming_it():
    body, ctype = encode([("file", "a.png", b"1"), ("file", "b.png", b"2"), ("file", "c.png", b"3")])
    with pytest.raises(Invalid, match="3 images, at most 2"):
        file_parts(body, ctype, "file", 2)


@pytest.mark.parametrize("ctype", ["multipart/form-data", "multipart/form-data; boundary=", "multipart/form-data; boundary=" + "b" * 71])
def test_a_missing_or_overlong_boundary_is_a_400(ctype):
    with pytest.raises(BadInput, match="boundary"):
        file_parts(b"--b\r\n\r\nx\r\n--b--", ctype, "file", 1)
