"""The file parts of a multipart/form-data body (RFC 7578) that is already in memory.

Why not Starlette's `request.form()`: it wraps every part in an UploadFile on a spooled temporary file
and awaits its writes and reads. Why not python-multipart's callback parser on the bytes either: it
walks the body in Python a byte state at a time and calls back per header and chunk, ~30 us for one
small upload, while the body is already in memory (service.body read it, within its size
limit) and `bytes.find` locates every delimiter in C: ~3 us. Everything here is linear in the body.
"""

from __future__ import annotations

import re

from service.errors import BadInput, Invalid

# A parameter of a header value: name=token or name="quoted string" (backslash escapes inside quotes).
_PARAM = re.compile(rb';\s*([^\s=;]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^;]*)')
_QUOTED_PAIR = re.compile(rb"\\(.)")


def header_params(value: bytes) -> tuple[bytes, dict[bytes, bytes]]:
    """`form-data; name="file"; filename="a;b.png"` -> (b"form-data", {b"name": b"file", b"filename": b"a;b.png"}).

    Parameter names are lower-cased; a quoted value may hold `;` and escaped quotes."""
    head, sep, _ = value.partition(b";")
    params: dict[bytes, bytes] = {}
    if sep:
        for name, raw in _PARAM.findall(value, len(head)):
            raw = raw.strip()
            if raw[:1] == b'"' and raw[-1:] == b'"' and len(raw) >= 2:
                raw = _QUOTED_PAIR.sub(rb"\1", raw[1:-1])
            params[name.lower()] = raw
    return head.strip().lower(), params


def _boundary(content_type: str) -> bytes:
    _, params = header_params(content_type.encode("latin-1", "replace"))
    boundary = params.get(b"boundary", b"")
    if not boundary:
        raise BadInput("malformed multipart body: no boundary in the Content-Type header")
    if len(boundary) > 70:  # RFC 2046: 1 to 70 characters
        raise BadInput("malformed multipart body: boundary longer than 70 characters")
    return boundary


def _part_is_file(headers: bytes, field: bytes) -> bool:
    """Whether the part's Content-Disposition names `field` and carries a filename (a file input, not a text one)."""
    for line in headers.split(b"\r\n"):
        name, colon, value = line.partition(b":")
        if colon and name.strip().lower() == b"content-disposition":
            _, params = header_params(value)
            return params.get(b"name") == field and b"filename" in params
    return False


def file_parts(body: bytes, content_type: str, field: str, limit: int) -> list[bytes]:
    """The uploaded files in form field `field`: 400 for a malformed body, 422 when none or over `limit`.

    At most `limit + 16` parts of any kind are looked at: a body of a thousand tiny fields is refused
    rather than walked."""
    delimiter = b"--" + _boundary(content_type)
    want, max_parts = field.encode(), limit + 16
    # The first delimiter opens the body, or follows a preamble and a CRLF.
    pos = 0 if body.startswith(delimiter) else body.find(b"\r\n" + delimiter)
    if pos < 0:
        raise BadInput("malformed multipart body: no opening boundary")
    if pos:
        pos += 2
    files: list[bytes] = []
    parts = 0
    next_delimiter = b"\r\n" + delimiter
    while True:
        pos += len(delimiter)
        if body.startswith(b"--", pos):  # the close delimiter; what follows is an epilogue
            break
        eol = body.find(b"\r\n", pos)
        if eol < 0 or body[pos:eol].strip(b" \t"):  # transport padding only, then CRLF
            raise BadInput("malformed multipart body: a boundary line is not followed by a line break")
        parts += 1
        if parts > max_parts:
            raise Invalid(f"more than {max_parts} parts in the multipart body")
        data_end = body.find(next_delimiter, eol)
        if data_end < 0:
            raise BadInput("malformed multipart body: it ends before its closing boundary")
        if body.startswith(b"\r\n", eol + 2):  # a part without headers
            headers, data_start = b"", eol + 4
        else:
            end = body.find(b"\r\n\r\n", eol + 2, data_end + 2)
            if end < 0:
                raise BadInput("malformed multipart body: a part's headers run into the next boundary")
            headers, data_start = body[eol + 2 : end], end + 4
        if _part_is_file(headers, want):
            files.append(body[data_start:data_end])
        pos = data_end + 2
    if not files:
        raise Invalid(f"multipart body needs an image in field '{field}'")
    if len(files) > limit:
        raise Invalid(f"{len(files)} images, at most {limit} per request")
    return files
