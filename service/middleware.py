"""The outermost ASGI middleware: what every response carries, and what every request is counted as.

Pure ASGI for its cost per request. HEAD is served here as GET without the body (RFC 9110: the same response, no
content), so every GET endpoint answers HEAD without a second operation per path in /openapi.json. The app gets a
copy of the scope that says GET; the server keeps its own, which still says HEAD.
"""

from __future__ import annotations

import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.metrics import Metrics

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
]


class EdgeMiddleware:
    """Security headers on every response; HEAD as GET; requests in flight, then by route template, method and status.

    The in-flight count is the service's only one: the Prometheus gauge reads it, and so does the batcher, which runs
    a batch on fewer threads while other requests are in flight (see Batcher._next_batch). A request counts from its
    arrival to the end of its answer. A rejection before the route ran (413, 415, 400 bad_json) is labelled with the
    route it was sent to, since routing comes first; a mounted app's requests by its mount; a path nothing matches, "other"."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        start = time.perf_counter()
        status = 500
        head = scope["method"] == "HEAD"
        inner = {**scope, "method": "GET"} if head else scope
        root_path = scope.get("root_path", "")

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                names = {k.lower() for k, _ in message.get("headers", [])}
                message["headers"] = list(message.get("headers", [])) + [h for h in SECURITY_HEADERS if h[0] not in names]
            elif head and message["type"] == "http.response.body":
                message = {**message, "body": b""}
            await send(message)

        try:
            with self.metrics.serving():
                await self.app(inner, receive, send_wrapper)
        finally:
            mount = inner.get("root_path", "")[len(root_path) :]  # a mount that matched (/static) added its path to root_path
            endpoint = getattr(inner.get("route"), "path", None) or mount or "other"
            self.metrics.requests.labels(endpoint, scope["method"], str(status)).inc()
            self.metrics.latency.labels(endpoint).observe(time.perf_counter() - start)
