"""ASGI middleware that guards the app before FastAPI parses anything, and adds headers and metrics.

Why pure ASGI: the body limit must stop reading at the limit (a 30 MB upload is refused after 5 MB,
not after it is all in memory), and the JSON depth check must run before Python's parser recurses.
"""
from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.errors import error_body
from service.metrics import Metrics

JSON_ONLY = {"/reconstruct", "/perturb"}
JSON_OR_MULTIPART = {"/predict", "/predict/batch"}

CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
       "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
]


async def _send_error(send: Send, status: int, code: str, detail: str) -> None:
    body = json.dumps(error_body(status, code, detail)).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), (b"connection", b"close")] + SECURITY_HEADERS})
    await send({"type": "http.response.body", "body": body})


def json_depth_exceeds(body: bytes, limit: int) -> bool:
    """True if brackets nest deeper than `limit` outside strings; linear, no recursion."""
    depth, in_str, esc = 0, False, False
    for ch in body:
        if in_str:
            if esc:
                esc = False
            elif ch == 0x5C:  # backslash
                esc = True
            elif ch == 0x22:
                in_str = False
        elif ch == 0x22:
            in_str = True
        elif ch in (0x5B, 0x7B):
            depth += 1
            if depth > limit:
                return True
        elif ch in (0x5D, 0x7D):
            depth -= 1
    return False


class GuardMiddleware:
    """Media type, body size and JSON depth, checked before the body reaches FastAPI."""

    def __init__(self, app: ASGIApp, max_body_bytes: int, max_json_depth: int) -> None:
        self.app = app
        self.max_body = max_body_bytes
        self.max_depth = max_json_depth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("POST", "PUT", "PATCH"):
            return await self.app(scope, receive, send)
        path = scope["path"]
        headers = dict(scope["headers"])
        ctype = headers.get(b"content-type", b"").decode("latin-1").split(";")[0].strip().lower()
        is_json = ctype == "application/json" or ctype.endswith("+json")
        if path in JSON_ONLY and not is_json:
            return await _send_error(send, 415, "unsupported_media_type", f"{path} takes application/json, not {ctype or 'no content type'}")
        if path in JSON_OR_MULTIPART and not (is_json or ctype == "multipart/form-data"):
            return await _send_error(send, 415, "unsupported_media_type",
                                     f"{path} takes multipart/form-data (field 'file') or application/json, not {ctype or 'no content type'}")
        declared = headers.get(b"content-length")
        if declared is not None:
            try:
                if int(declared) > self.max_body:
                    return await _send_error(send, 413, "too_large", f"body of {int(declared)} bytes is over the {self.max_body} byte limit")
            except ValueError:
                return await _send_error(send, 400, "bad_request", "invalid Content-Length")
        # Read the body ourselves, up to the limit, then replay it to the app.
        chunks, size = [], 0
        while True:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                return
            chunk = msg.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                return await _send_error(send, 413, "too_large", f"body is over the {self.max_body} byte limit")
            chunks.append(chunk)
            if not msg.get("more_body", False):
                break
        body = b"".join(chunks)
        if is_json and json_depth_exceeds(body, self.max_depth):
            return await _send_error(send, 400, "bad_json", f"JSON nests deeper than {self.max_depth} levels")
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


class HeadersAndMetricsMiddleware:
    """Security headers on every response; request counts and latency by route template."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        start = time.perf_counter()
        status = 500
        self.metrics.inflight.inc()

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                names = {k.lower() for k, _ in message.get("headers", [])}
                message["headers"] = list(message.get("headers", [])) + [h for h in SECURITY_HEADERS if h[0] not in names]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            self.metrics.inflight.dec()
            route = scope.get("route")
            endpoint = getattr(route, "path", None) or ("/static" if scope["path"].startswith("/static/") else "other")
            self.metrics.requests.labels(endpoint, scope["method"], str(status)).inc()
            self.metrics.latency.labels(endpoint).observe(time.perf_counter() - start)
