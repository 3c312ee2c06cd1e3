"""The image parts of a multipart/form-data body that is already in memory.

Why not Starlette's `request.form()`: it wraps every part in an UploadFile on a spooled temporary
file and awaits its writes and reads, ~100 us a request, a tenth of the event loop's work per
/predict; the guard middleware has already read the (size-limited) body, so the parts are sliced
out of it directly with the same python-multipart parser, ~10 us.
"""
from __future__ import annotations

from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header

from service.errors import BadInput, Invalid


class _Collector:
    """python-multipart callbacks: keeps the data of the parts named `field`, counts every part."""

    def __init__(self, field: str, max_parts: int) -> None:
        self.field = field.encode()
        self.max_parts = max_parts
        self.parts = 0
        self.files: list[bytes] = []
        self._header_name = bytearray()
        self._header_value = bytearray()
        self._name: bytes | None = None
        self._is_file = False
        self._chunks: list[bytes] = []
        self.open = False  # inside a part: a body that ends here was cut short

    def callbacks(self) -> dict:
        return {
            "on_part_begin": self._part_begin,
            "on_header_field": lambda d, s, e: self._header_name.extend(d[s:e]),
            "on_header_value": lambda d, s, e: self._header_value.extend(d[s:e]),
            "on_header_end": self._header_end,
            "on_part_data": lambda d, s, e: self._chunks.append(bytes(d[s:e])),
            "on_part_end": self._part_end,
        }

    def _part_begin(self) -> None:
        self.parts += 1
        if self.parts > self.max_parts:
            raise Invalid(f"more than {self.max_parts} parts in the multipart body")
        self._name, self._is_file, self._chunks, self.open = None, False, [], True

    def _header_end(self) -> None:
        if bytes(self._header_name).lower() == b"content-disposition":
            _, params = parse_options_header(bytes(self._header_value))
            self._name = params.get(b"name")
            self._is_file = b"filename" in params
        self._header_name.clear()
        self._header_value.clear()

    def _part_end(self) -> None:
        self.open = False
        if self._name == self.field and self._is_file:
            self.files.append(b"".join(self._chunks))
        self._chunks = []


def file_parts(body: bytes, content_type: str, field: str, limit: int) -> list[bytes]:
    """The uploaded files in form field `field`: 400 for a malformed body, 422 when none or over `limit`."""
    _, params = parse_options_header(content_type)
    boundary = params.get(b"boundary")
    if not boundary:
        raise BadInput("malformed multipart body: no boundary in the Content-Type header")
    collector = _Collector(field, max_parts=limit + 16)
    try:
        parser = MultipartParser(boundary, collector.callbacks())
        parser.write(body)
        parser.finalize()
    except (MultipartParseError, ValueError) as e:
        raise BadInput(f"malformed multipart body: {e}") from e
    if collector.open or collector.parts == 0:
        raise BadInput("malformed multipart body: it ends before its closing boundary")
    if not collector.files:
        raise Invalid(f"multipart body needs an image in field '{field}'")
    if len(collector.files) > limit:
        raise Invalid(f"{len(collector.files)} images, at most {limit} per request")
    return collector.files
