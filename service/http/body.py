"""A request's body, checked once before anything parses it, read once and parsed once; routes take it as `Upload`
(/predict and /predict/batch within `PredictArgs` and `BatchArgs`, service/deps.py).

Why a route class (FastAPI's hook for a custom request) and not ASGI middleware: it runs after routing, so a method a
path does not take is a 405 before its media type is looked at, and a refused body is counted under the route it was
sent to; and it runs before FastAPI reads the body, so the size limit stops reading at the limit (a 30 MB upload is
refused once past it, not after it is all in memory).

A route takes the media types its OpenAPI request body documents, or JSON for a pydantic body: what /openapi.json
says is what is enforced. JSON is parsed here for every route, by orjson alone (it refuses nesting past 1024 levels
itself, without recursing in Python), so malformed JSON is the same 400 `bad_json` on each, and a body of more than
`max_json_values` values is a 413 before it is parsed (see parse_json). A body larger than `inline_parse_bytes` is
parsed in the bounded decode pool: python-multipart walks a body in Python, handing the GIL to the event loop every few
milliseconds, and the pool bounds how many large bodies are parsed at once.

A body must also arrive in time: within `body_timeout_s` plus its size at `body_min_rate` bytes a second, or it is
refused with 408 and the connection closed, so a client trickling a body cannot hold a request for as long as it likes.
"""

from __future__ import annotations

import asyncio
import time
import types
import typing
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import orjson
from fastapi import Request, Response
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from starlette.requests import ClientDisconnect

from service.errors import BadJSON, ClientError, Invalid, RequestTimeout, TooLarge, UnsupportedMediaType
from service.metrics import progress
from service.settings import Settings
from service.threads import off_loop

JSON = "application/json"
MULTIPART = "multipart/form-data"
# Refused before the body was read to its end: closing the connection spares reading (and the client sending) the rest.
_CLOSE = {"Connection": "close"}
MAX_JSON_DEPTH = 1024  # orjson's own bound on nesting (its JSONDecodeError past it)


@dataclass(frozen=True, slots=True)
class Body:
    media_type: str  # JSON for every JSON type (application/*+json too), else as sent: lower case, no parameters
    content_type: str  # the header as sent: a multipart body's boundary is one of its parameters
    data: bytes
    json: Any = None  # the parsed document, for JSON
    parse_s: float = 0.0  # what parsing it took (the route's preprocess phase counts it)


class BodyRoute(APIRoute):
    """An APIRoute whose request body is checked, read and parsed by `read_body` before FastAPI or the route see it."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handle = super().get_route_handler()
        documented = ((self.openapi_extra or {}).get("requestBody") or {}).get("content")
        accepted = frozenset(documented or ([JSON] if self.body_field is not None else []))
        if not accepted:
            return handle
        taken = query_parameters(self.dependant)

        async def checked(request: Request) -> Response:
            if request.scope["query_string"]:
                check_query(request, self.path, taken)
            return await handle(ReadRequest(request, await read_body(request, self.path, accepted)))

        return checked


def query_parameters(dependant: Dependant) -> dict[str, bool]:
    """The query parameters a route takes, its own and its dependencies', each with whether it takes a list."""
    taken, todo = {}, [dependant]
    while todo:
        d = todo.pop()
        taken.update({p.alias: _is_list(p.field_info.annotation) for p in d.query_params})
        todo.extend(d.dependencies)
    return taken


def _is_list(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return any(_is_list(a) for a in typing.get_args(annotation))
    return origin in (list, tuple, set, frozenset)


def check_query(request: Request, path: str, taken: dict[str, bool]) -> None:
    """A query parameter the route does not take (a misspelt `?inlcude=`), or one of a single value given twice, is a 422
    as an unknown body field is: read past, it would answer something other than what was asked, and look right."""
    seen: set[str] = set()
    for name, _ in request.query_params.multi_items():
        if name not in taken:
            offered = ", ".join(sorted(taken)) or "none"
            raise Invalid(f"{path} takes no query parameter {name[:40]!r} (it takes: {offered})")
        if name in seen and not taken[name]:
            raise Invalid(f"query parameter {name!r} given more than once: it takes one value")
        seen.add(name)


class ReadRequest(Request):
    """The request as FastAPI and the route's dependencies see it: its body already read and parsed."""

    def __init__(self, request: Request, body: Body) -> None:
        super().__init__(request.scope, request.receive)
        self.checked = body

    async def body(self) -> bytes:
        return self.checked.data

    async def json(self) -> Any:
        return self.checked.json


async def read_body(request: Request, path: str, accepted: frozenset[str]) -> Body:
    """Media type and encoding (415), declared and actual size (413), arrival in time (408), then for JSON its syntax
    (400 `bad_json`)."""
    state = request.app.state.capsnet
    settings = state.settings
    content_type = request.headers.get("content-type", "")
    media = content_type.partition(";")[0].strip().lower()
    is_json = media == JSON or (media.startswith("application/") and media.endswith("+json"))
    if not (media in accepted or (is_json and JSON in accepted)):
        sent = media or "a body without a Content-Type header"
        raise UnsupportedMediaType(f"{path} takes {' or '.join(sorted(accepted))}, not {sent}", _CLOSE)
    encoding = request.headers.get("content-encoding", "identity").strip().lower()
    if encoding != "identity":  # else a gzipped body would be read as it is, and refused as JSON that is not UTF-8
        raise UnsupportedMediaType(f"{path} takes bodies as they are, not with Content-Encoding {encoding[:40]}", _CLOSE)
    data = await read_limited(request, settings)
    if not is_json:
        return Body(media, content_type, data)
    start = time.perf_counter()
    document = await off_loop(state.bounded_pool, settings.inline_parse_bytes, lambda d: parse_json(d, settings.max_json_values), data)
    return Body(JSON, content_type, data, document, time.perf_counter() - start)


async def read_limited(request: Request, settings: Settings) -> bytes:
    """The whole body, refused (413) by its declared size or once past `max_body_bytes` while it streams in, and (408)
    when it has not arrived within `body_timeout_s` plus its size at `body_min_rate`: never more in memory, never held open.

    Its own function for the Open Inference Protocol's infer route, which takes any media type (tritonclient sends none)."""
    limit = settings.max_body_bytes
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise ClientError(f"invalid Content-Length {declared[:40]!r}", _CLOSE)
        if int(declared) > limit:
            raise TooLarge(f"body of {int(declared)} bytes is over the {limit} byte limit", _CLOSE)
    expected = int(declared) if declared is not None else 0
    loop = asyncio.get_running_loop()
    start = loop.time()
    chunks, size = [], 0
    metrics = request.app.state.capsnet.metrics
    trace_start = time.perf_counter()

    def deadline() -> float:  # a chunked body earns its time as it arrives
        return start + settings.body_timeout_s + max(expected, size) / settings.body_min_rate

    try:
        with metrics.receiving_body():
            async with asyncio.timeout_at(deadline()) as timer:
                async for chunk in request.stream():
                    size += len(chunk)
                    if size > limit:
                        raise TooLarge(f"body is over the {limit} byte limit", _CLOSE)
                    chunks.append(chunk)
                    if declared is None:
                        timer.reschedule(deadline())
    except TimeoutError:
        raise RequestTimeout(
            f"the body did not arrive in time: {size} bytes in {loop.time() - start:.1f} s (allowed: "
            f"{settings.body_timeout_s:g} s plus {settings.body_min_rate} bytes a second)",
            _CLOSE,
        ) from None
    except ClientDisconnect:
        raise ClientError("the client went away before the body ended") from None
    finally:
        trace = progress().trace
        if trace is not None:  # the body's arrival, as its own span: the client's time, not the service's
            trace.phase("body", trace_start, time.perf_counter(), {"http.request.body.size": size})
    return b"".join(chunks)


def parse_json(data: bytes, max_values: int) -> Any:
    """The document, by orjson; refused unparsed when it holds more than `max_values` values.

    Why the count: orjson holds the GIL while it builds objects, in whatever thread, so no thread spares the event loop
    a parse of 16 MiB of `[],[],...` (1.9 s). Values are separated by commas, and nesting without them is bounded by
    MAX_JSON_DEPTH, so `bytes.count` (a C loop, 5 ms for 16 MiB) bounds the parse by what it must build. Commas in
    strings count too: a legitimate body (base64, numbers) has none there."""
    commas = data.count(b",")
    if commas >= max_values:
        raise TooLarge(f"the JSON body holds about {commas + 1} values, over the {max_values} value limit", _CLOSE)
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as e:  # also nesting past MAX_JSON_DEPTH, and text that is not UTF-8
        # the usual cause: base64 wrapped at 76 columns (`base64` without -w0) pasted into a JSON string
        hint = (
            " (a line break inside a string? JSON strings hold none: `base64 -w0` writes one line)"
            if "control character" in str(e)
            else " (JSON is UTF-8 text: a body in another encoding, or compressed, is not JSON)"
            if "UTF-8" in str(e)
            else ""
        )
        raise BadJSON(f"request body is not valid JSON: {e}{hint}") from None
