"""The file parts of a multipart/form-data body (RFC 7578), parsed by python-multipart (the parser Starlette uses).

Why python-multipart's callback parser on the bytes already in memory, and not Starlette's `request.form()`: the body
was read once, within its size and time limits, by service.http.body; `request.form()` would read it again and spool every
part to a temporary file through awaited writes. The parser bounds what a stranger can make it hold: a part's headers
(8 lines of at most 4224 bytes each), and here the number of parts. Like Starlette, it refuses what browsers never
send: a preamble before the first boundary, and transport padding after a boundary. It walks the body in Python, a cost linear in the
body that the inputs move off the event loop for large bodies (service/threads.off_loop).
"""

from __future__ import annotations

import logging

from python_multipart import MultipartParser
from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import parse_options_header

from service.errors import BadInput, Invalid

MAX_BOUNDARY = 70  # RFC 2046: 1 to 70 characters
# The parser logs each malformed body it meets as a warning; the client is told in its 400, and a stranger's bodies
# should not fill the service's log.
logging.getLogger("python_multipart").setLevel(logging.ERROR)


class _TooManyParts(Exception):
    pass


class _NotTaken(Exception):
    """A part the route does not take: said in a 422 rather than ignored, since an option sent as a form field (a
    misplaced `include`) would otherwise look like it had been applied."""


def boundary_of(content_type: str) -> bytes:
    _, params = parse_options_header(content_type.encode("latin-1", "replace"))  # as HTTP carries it
    boundary = params.get(b"boundary", b"")
    if not boundary:
        raise BadInput("malformed multipart body: no boundary in the Content-Type header")
    if len(boundary) > MAX_BOUNDARY:
        raise BadInput(f"malformed multipart body: boundary longer than {MAX_BOUNDARY} characters")
    return boundary


def file_parts(body: bytes, content_type: str, field: str, limit: int) -> list[bytes]:
    """The uploaded files in form field `field`: 400 for a malformed body, 422 when none or over `limit`, or for any other
    part (another field, or text in `field`).

    At most `limit + 16` parts of any kind are looked at: a body of a thousand tiny fields is refused rather than walked."""
    want, max_parts = field.encode(), limit + 16
    files: list[bytes] = []
    parts = 0
    header_name, header_value, disposition, chunks = bytearray(), bytearray(), b"", []
    ended = False

    def on_part_begin() -> None:
        nonlocal parts, disposition
        parts += 1
        if parts > max_parts:
            raise _TooManyParts
        disposition = b""
        chunks.clear()

    def on_header_field(data: bytes, start: int, end: int) -> None:
        header_name.extend(data[start:end])

    def on_header_value(data: bytes, start: int, end: int) -> None:
        header_value.extend(data[start:end])

    def on_header_end() -> None:
        nonlocal disposition
        if header_name.strip().lower() == b"content-disposition":
            disposition = bytes(header_value)
        header_name.clear()
        header_value.clear()

    def on_part_data(data: bytes, start: int, end: int) -> None:
        chunks.append(data[start:end])

    def on_part_end() -> None:
        _, params = parse_options_header(disposition)
        name = params.get(b"name")
        if name == want and b"filename" in params:  # a file input, not a text one
            files.append(b"".join(chunks))
        elif name == want:
            raise _NotTaken(f"field '{field}' holds text, not a file: send the image as a file (curl -F {field}=@digit.png)")
        else:
            shown = "without a name" if name is None else repr(name[:40].decode("utf-8", "replace"))
            raise _NotTaken(f"multipart field {shown} is not taken: the image goes in field '{field}', options in the query string")
        chunks.clear()

    def on_end() -> None:
        nonlocal ended
        ended = True

    callbacks = {
        "on_part_begin": on_part_begin,
        "on_header_field": on_header_field,
        "on_header_value": on_header_value,
        "on_header_end": on_header_end,
        "on_part_data": on_part_data,
        "on_part_end": on_part_end,
        "on_end": on_end,
    }
    parser = MultipartParser(boundary_of(content_type), callbacks)  # type: ignore[arg-type]
    try:
        parser.write(body)
        parser.finalize()
    except _TooManyParts:
        raise Invalid(f"more than {max_parts} parts in the multipart body") from None
    except _NotTaken as e:
        raise Invalid(str(e)) from None
    except MultipartParseError as e:
        raise BadInput(f"malformed multipart body: {e}") from None
    if not ended:
        raise BadInput("malformed multipart body: it ends before its closing boundary")
    if not files:
        raise Invalid(f"multipart body needs an image in field '{field}'")
    if len(files) > limit:
        raise Invalid(f"{len(files)} images, at most {limit} per request")
    return files
