"""Every failure a request can meet, in one place, with the status it is answered with: what a client can cause (a JSON
4xx with a message that says what to change) and what the service cannot do now (503 with Retry-After, or a 500 with
an id to quote).

Body: {"error": "<code>", "detail": "<message>"}; validation errors add "errors": [{loc, msg, type}].
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
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


def error_body(code: str, detail: str, **extra: object) -> dict:
    return {"error": code, "detail": detail, **extra}


def json_error(status: int, code: str, detail: str, headers: dict[str, str] | None = None, **extra: object) -> JSONResponse:
    return JSONResponse(error_body(code, detail, **extra), status_code=status, headers=headers)


def _safe_errors(exc: RequestValidationError) -> list[dict]:
    """Validation errors without their input values (which may be NaN, huge, or not JSON at all)."""
    return [{"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))} for e in exc.errors()[:20]]


def install_handlers(app: FastAPI) -> None:
    @app.exception_handler(ClientError)
    async def _client(_: Request, exc: ClientError) -> JSONResponse:
        return json_error(exc.status, exc.code, exc.detail, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = _safe_errors(exc)
        first = errors[0] if errors else {"loc": [], "msg": "invalid request"}
        where = ".".join(str(p) for p in first["loc"] if p != "body")
        return json_error(422, "invalid", f"{where}: {first['msg']}" if where else first["msg"], errors=errors)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed", 400: "bad_request"}.get(exc.status_code, "http_error")
        return json_error(exc.status_code, code, str(exc.detail), headers=getattr(exc, "headers", None))

    @app.exception_handler(Overloaded)
    async def _overloaded(_: Request, exc: Overloaded) -> JSONResponse:
        return json_error(503, "overloaded", str(exc), headers={"Retry-After": str(exc.retry_after_s)})

    @app.exception_handler(EngineUnavailable)
    async def _engine(_: Request, exc: EngineUnavailable) -> JSONResponse:
        log.warning("engine unavailable: %s", exc)
        return json_error(503, "engine_unavailable", str(exc), headers={"Retry-After": str(exc.retry_after_s)})

    @app.exception_handler(InferenceFailed)
    async def _failed(_: Request, exc: InferenceFailed) -> JSONResponse:
        ident = uuid.uuid4().hex[:12]
        log.error("inference failed, id %s: %s", ident, exc)
        return json_error(500, "inference_failed", f"the model failed on this request; quote id {ident}", id=ident)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        ident = uuid.uuid4().hex[:12]
        log.exception("unexpected error on %s %s, id %s", request.method, request.url.path, ident)
        return json_error(500, "internal", f"unexpected server error; quote id {ident}", id=ident)
