"""Every failure a request can meet, in one place, with the status it is answered with: what a client can cause (a JSON
4xx with a message that says what to change) and what the service cannot do now (503 with Retry-After, or a 500 with
an id to quote).

Body: {"error": "<code>", "detail": "<message>"}; validation errors add "errors": [{loc, msg, type}]. Over gRPC the
same failure is a status code from the table's gRPC column (GRPC_CODES) with the same message.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse

log = logging.getLogger("capsnet.errors")
T = TypeVar("T")


class Overloaded(Exception):
    """The queue in front of the model is full, or a request waited longer than its limit."""

    def __init__(self, message: str, retry_after_s: int = 1) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class EngineUnavailable(Overloaded):
    """The remote engine (CAPSNET_ENGINE_URL) cannot be reached, timed out, or answered 5xx: a 503 with Retry-After,
    since the request itself was fine and may succeed once the engine is back (service/engine/remote.py)."""


class InferenceFailed(Exception):
    """The model raised on a batch; every request in it gets a 500 with this id."""


class ClientError(Exception):
    status = 400
    code = "bad_request"

    def __init__(self, detail: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.headers = headers

    def at(self, where: str) -> ClientError:
        """The same error about one item of a request: `image 2: cannot decode image: ...`."""
        return type(self)(f"{where}: {self.detail}", self.headers)


def for_item(i: int, n: int, fn: Callable[..., T], *args: Any) -> T:
    """fn(*args) on item i of a request's n; a client error names the item when there are several (`image 2: ...`)."""
    try:
        return fn(*args)
    except ClientError as e:
        if n > 1:
            raise e.at(f"image {i}") from None
        raise


class BadInput(ClientError):
    status, code = 400, "bad_input"


class BadJSON(ClientError):
    status, code = 400, "bad_json"


class NoRouting(ClientError):
    status, code = 404, "not_found"


class NotReady(ClientError):
    status, code = 503, "not_ready"


class NotServed(ClientError):
    status, code = 404, "model_not_served"


class RequestTimeout(ClientError):
    status, code = 408, "request_timeout"


class TooLarge(ClientError):
    status, code = 413, "too_large"


class UnsupportedMediaType(ClientError):
    status, code = 415, "unsupported_media_type"


class Invalid(ClientError):
    status, code = 422, "invalid"


def is_protocol(path: str) -> bool:
    """Whether `path` is the Open Inference Protocol's (/v2), whose refusals are its own body, `{"error": message}`."""
    return path == "/v2" or path.startswith("/v2/")


def error_body(code: str, detail: str, **extra: object) -> dict:
    return {"error": code, "detail": detail, **extra}


def json_error(status: int, code: str, detail: str, headers: dict[str, str] | None = None, **extra: object) -> JSONResponse:
    return JSONResponse(error_body(code, detail, **extra), status_code=status, headers=headers)


# pydantic's error types for a value that should have been an object: a model validated from the parsed body, and a
# FastAPI body parameter
OBJECT_EXPECTED = frozenset({"model_type", "model_attributes_type"})


def _message(error: dict) -> str:
    """pydantic's message in a client's terms: a check of ours without pydantic's "Value error, " before it, a value
    that should be an object called a JSON object, not an instance of one of this service's classes, and one that should
    be a number a JSON number."""
    if error.get("type") in OBJECT_EXPECTED:
        return "should be a JSON object"
    if error.get("type") == "float_type":  # the schemas' floats are strict (service/schemas.py): a string or a boolean
        return "should be a JSON number"
    return str(error.get("msg", "")).removeprefix("Value error, ")


def _safe_errors(exc: RequestValidationError) -> list[dict]:
    """Validation errors without their input values (which may be NaN, huge, or not JSON at all)."""
    return [{"loc": list(e.get("loc", ())), "msg": _message(e), "type": str(e.get("type", ""))} for e in exc.errors()[:20]]


@dataclass(frozen=True, slots=True)
class Failure:
    """How one failure is answered: the REST body uses all of it, the Open Inference Protocol's `{"error": detail}`
    the status and the detail (service/routers/oip.py)."""

    status: int
    code: str
    detail: str
    headers: dict[str, str] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _retry(exc: Overloaded) -> dict[str, str]:
    return {"Retry-After": str(exc.retry_after_s)}


def classify(exc: Exception, where: str = "") -> Failure:
    """The one table of what each failure is answered with. Anything not in it is a 500 with an id, logged."""
    if isinstance(exc, ClientError):
        return Failure(exc.status, exc.code, exc.detail, exc.headers)
    if isinstance(exc, RequestValidationError):
        errors = _safe_errors(exc)
        first = errors[0] if errors else {"loc": [], "msg": "invalid request", "type": ""}
        at = ".".join(str(p) for p in first["loc"] if p != "body")
        whole = "the body " + first["msg"] if first["type"] in OBJECT_EXPECTED else first["msg"]
        return Failure(422, "invalid", f"{at}: {first['msg']}" if at else whole, extra={"errors": errors})
    if isinstance(exc, StarletteHTTPException):
        code = {404: "not_found", 405: "method_not_allowed", 400: "bad_request"}.get(exc.status_code, "http_error")
        return Failure(exc.status_code, code, str(exc.detail), getattr(exc, "headers", None))
    if isinstance(exc, EngineUnavailable):  # before Overloaded, which it is
        log.warning("engine unavailable: %s", exc)
        return Failure(503, "engine_unavailable", str(exc), _retry(exc))
    if isinstance(exc, Overloaded):
        return Failure(503, "overloaded", str(exc), _retry(exc))
    ident = uuid.uuid4().hex[:12]
    if isinstance(exc, InferenceFailed):
        log.error("inference failed, id %s: %s", ident, exc)
        return Failure(500, "inference_failed", f"the model failed on this request; quote id {ident}", extra={"id": ident})
    log.error("unexpected error on %s, id %s", where or "a request", ident, exc_info=exc)
    return Failure(500, "internal", f"unexpected server error; quote id {ident}", extra={"id": ident})


# The same table's gRPC column: the status code a gRPC call fails with (grpc.StatusCode's names) for each HTTP status
# above, as Triton's gRPC endpoint maps its error kinds (invalid argument, not found, unavailable, internal). A body
# too large is RESOURCE_EXHAUSTED, as gRPC itself answers a message over its size limit.
GRPC_CODES = {
    400: "INVALID_ARGUMENT",
    404: "NOT_FOUND",
    405: "UNIMPLEMENTED",
    408: "DEADLINE_EXCEEDED",
    413: "RESOURCE_EXHAUSTED",
    415: "INVALID_ARGUMENT",
    422: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def grpc_code(status: int) -> str:
    """The gRPC status code's name for an HTTP status: GRPC_CODES, else any other 4xx an invalid argument and 5xx internal."""
    return GRPC_CODES.get(status) or ("INVALID_ARGUMENT" if 400 <= status < 500 else "INTERNAL")


def _not_allowed(request: Request, exc: StarletteHTTPException) -> StarletteHTTPException:
    """Starlette's 405 says only "Method Not Allowed", and its Allow header leaves out the HEAD that the edge middleware
    serves for every GET: the answer names the methods the path takes, all of them."""
    allowed = {m.strip() for m in (exc.headers or {}).get("Allow", "").split(",") if m.strip()}
    if "GET" in allowed:
        allowed.add("HEAD")
    methods = sorted(allowed)
    detail = f"{request.url.path} takes {' or '.join(methods)}, not {request.method}"
    return StarletteHTTPException(405, detail, headers={**(exc.headers or {}), "Allow": ", ".join(methods)})


def install_handlers(app: FastAPI) -> None:
    """Every failure the routes raise, answered as `classify` says."""

    async def answer(request: Request, exc: Exception) -> JSONResponse:
        if isinstance(exc, StarletteHTTPException) and exc.status_code == 405:
            exc = _not_allowed(request, exc)
        f = classify(exc, f"{request.method} {request.url.path}")
        path = request.url.path
        if is_protocol(path):  # a method or path the protocol's routes do not take: its own body
            return JSONResponse({"error": f.detail}, status_code=f.status, headers=f.headers)
        return json_error(f.status, f.code, f.detail, f.headers, **f.extra)

    for kind in (ClientError, RequestValidationError, StarletteHTTPException, Overloaded, InferenceFailed, Exception):
        app.add_exception_handler(kind, answer)
