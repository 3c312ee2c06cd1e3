"""A request's body, checked once before anything parses it, read once and parsed once; routes take it as `Upload`.

Why a route class (FastAPI's hook for a custom request) and not ASGI middleware: it runs after routing, so a method a
path does not take is a 405 before its media type is looked at, and a refused body is counted under the route it was
sent to; and it runs before FastAPI reads the body, so the size limit stops reading at the limit (a 30 MB upload is
refused once past it, not after it is all in memory) and the depth check runs before Python's parser recurses.

A route takes the media types its OpenAPI request body documents, or JSON for a pydantic body: what /openapi.json
says is what is enforced. JSON is parsed here for every route, so malformed JSON is the same 400 `bad_json` on each.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Annotated, Any

import numpy as np
from fastapi import Depends, Request, Response
from fastapi.routing import APIRoute
from starlette.requests import ClientDisconnect

from service.errors import BadJSON, ClientError, TooLarge, UnsupportedMediaType

JSON = "application/json"
MULTIPART = "multipart/form-data"
# Refused before the body was read to its end: closing the connection spares reading (and the client sending) the rest.
_CLOSE = {"Connection": "close"}
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')  # a JSON string, escapes and all
_DEPTH_STEP = np.zeros(256, np.int32)
_DEPTH_STEP[list(b"[{")], _DEPTH_STEP[list(b"]}")] = 1, -1


@dataclass(frozen=True, slots=True)
class Body:
    media_type: str  # JSON for every JSON type (application/*+json too), else as sent: lower case, no parameters
    content_type: str  # the header as sent: a multipart body's boundary is one of its parameters
    data: bytes
    json: Any = None  # the parsed document, for JSON


class BodyRoute(APIRoute):
    """An APIRoute whose request body is checked, read and parsed by `read_body` before FastAPI or the route see it."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handle = super().get_route_handler()
        documented = ((self.openapi_extra or {}).get("requestBody") or {}).get("content")
        accepted = frozenset(documented or ([JSON] if self.body_field is not None else []))
        if not accepted:
            return handle

        async def checked(request: Request) -> Response:
            return await handle(_ReadRequest(request, await read_body(request, self.path, accepted)))

        return checked


class _ReadRequest(Request):
    """The request as FastAPI and the route's dependencies see it: its body already read and parsed."""

    def __init__(self, request: Request, body: Body) -> None:
        super().__init__(request.scope, request.receive)
        self.checked = body

    async def body(self) -> bytes:
        return self.checked.data

    async def json(self) -> Any:
        return self.checked.json


async def read_body(request: Request, path: str, accepted: frozenset[str]) -> Body:
    """Media type (415), declared and actual size (413), then for JSON nesting and syntax (400 `bad_json`)."""
    settings = request.app.state.capsnet.settings
    content_type = request.headers.get("content-type", "")
    media = content_type.partition(";")[0].strip().lower()
    is_json = media == JSON or (media.startswith("application/") and media.endswith("+json"))
    if not (media in accepted or (is_json and JSON in accepted)):
        raise UnsupportedMediaType(f"{path} takes {' or '.join(sorted(accepted))}, not {media or 'no content type'}", _CLOSE)
    data = await read_limited(request, settings.max_body_bytes)
    if not is_json:
        return Body(media, content_type, data)
    return Body(JSON, content_type, data, parse_json(data, settings.max_json_depth))


async def read_limited(request: Request, limit: int) -> bytes:
    """The whole body, refused (413) by its declared size or once past `limit` while it streams in: never more in memory.

    Its own function for the Open Inference Protocol's infer route, which takes any media type (tritonclient sends none)."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise ClientError(f"invalid Content-Length {declared[:40]!r}", _CLOSE)
        if int(declared) > limit:
            raise TooLarge(f"body of {int(declared)} bytes is over the {limit} byte limit", _CLOSE)
    chunks, size = [], 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise TooLarge(f"body is over the {limit} byte limit", _CLOSE)
            chunks.append(chunk)
    except ClientDisconnect:
        raise ClientError("the client went away before the body ended") from None
    return b"".join(chunks)


def parse_json(data: bytes, max_depth: int) -> Any:
    if json_depth_exceeds(data, max_depth):
        raise BadJSON(f"JSON nests deeper than {max_depth} levels")
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError is a ValueError
        raise BadJSON(f"request body is not valid JSON: {e}") from None


def json_depth_exceeds(body: bytes, limit: int) -> bool:
    """True if brackets nest deeper than `limit` outside strings; no recursion, and no Python loop over the bytes.

    Why regex and numpy: this runs on the event loop for every JSON body, and a loop over each byte took 0.5 s of it
    for a 12 MB body of base64 (here: 0.1 s). Strings go first (a base64 image is one string, so little is left);
    a string left open leaves its brackets counted, and such a body is not JSON anyway."""
    bare = _STRING.sub(b"", body)
    if bare.count(b"[") + bare.count(b"{") <= limit:
        return False
    return bool(np.cumsum(_DEPTH_STEP[np.frombuffer(bare, np.uint8)]).max() > limit)


async def _checked_body(request: Request) -> Body:
    assert isinstance(request, _ReadRequest), "a route that takes Upload must be a BodyRoute"
    return request.checked


Upload = Annotated[Body, Depends(_checked_body)]
