"""The outermost ASGI middleware: what every response carries, what every request is counted as, and work dropped when
its client has gone.

Pure ASGI for its cost per request. HEAD is served here as GET without the body (RFC 9110: the same response, no
content), so every GET endpoint answers HEAD without a second operation per path in /openapi.json. The app gets a
copy of the scope that says GET; the server keeps its own, which still says HEAD.

Why abandoned requests are dropped: a client that times out and retries, or resets its connection, leaves a request
that nobody will read. Served to the end, each costs its decode, a place in a batch and the encoding of its answer, so
impatient clients make an overload worse, as a retry storm does. Once a request's body has arrived, a watcher waits on
the connection; if the client goes before the answer starts, the request's work is cancelled wherever it is (a batch
already in the model finishes; the queue lets go of a request still waiting), and it is counted by the phase it reached.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from opentelemetry.trace import SpanKind
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.metrics import PROGRESS, Metrics, Progress
from service.tracing import PROBES, RequestTrace, Tracing, request_id

CLIENT_GONE = "499"  # nginx's code for a request whose client closed the connection first: nobody got an answer
_DISCONNECT: Message = {"type": "http.disconnect"}
LOOP_TURNS_TO_SEE_A_RESET = 3

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

    def __init__(
        self, app: ASGIApp, metrics: Metrics, drop_abandoned: bool = True, tracing: Callable[[], Tracing | None] = lambda: None
    ) -> None:
        self.app = app
        self.metrics = metrics
        self.drop_abandoned = drop_abandoned
        self.tracing = tracing  # the app's, once its lifespan has read the OTEL_* variables (service/tracing.py)

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

        progress = Progress(_request_id(scope["headers"]))
        tracing = self.tracing()
        trace = None if tracing is None or scope["path"] in PROBES else _server_span(tracing, scope, progress)
        token = PROGRESS.set(progress)
        try:
            with self.metrics.serving():
                if self.drop_abandoned and scope["method"] in ("POST", "PUT", "PATCH"):
                    await self._unless_abandoned(inner, receive, send_wrapper, progress)
                else:
                    await self.app(inner, receive, send_wrapper)
        finally:
            PROGRESS.reset(token)
            mount = inner.get("root_path", "")[len(root_path) :]  # a mount that matched (/static) added its path to root_path
            endpoint = getattr(inner.get("route"), "path", None) or mount or "other"
            if progress.gone:  # whatever the app raised once its client had gone, nobody was there to get it
                self.metrics.abandoned.labels(progress.phase).inc()
            self.metrics.requests.labels(endpoint, scope["method"], CLIENT_GONE if progress.gone else str(status)).inc()
            self.metrics.latency.labels(endpoint).observe(time.perf_counter() - start)
            if trace is not None:
                answered = {"http.route": endpoint, "http.response.status_code": 499 if progress.gone else status}
                trace.end(answered, progress.gone or status >= 500, f"{scope['method']} {endpoint}")

    async def _unless_abandoned(self, scope: Scope, receive: Receive, send: Send, progress: Progress) -> None:
        """The app, cancelled if the client goes away before the answer starts (`progress.gone` says so). The watcher starts once
        the body is in (until then the app reads the connection, and sees a disconnect itself); after that, the app's own
        reads wait on the watcher. Plain asyncio (a task, Task.cancel and uncancel), not anyio's task group or cancel
        scope: an error of the app's reaches the error handlers as it was raised, and the per-request cost stays small."""
        task = asyncio.current_task()
        assert task is not None
        left = asyncio.Event()
        answering = cancelled = False
        watcher: asyncio.Task | None = None

        async def watch() -> None:
            nonlocal cancelled
            if (await receive())["type"] == "http.disconnect":
                left.set()
                if not answering:
                    progress.gone = cancelled = True
                    task.cancel()

        async def app_receive() -> Message:
            nonlocal watcher
            if watcher is not None:  # nothing but a disconnect can come now, and the watcher reads it
                await left.wait()
                return _DISCONNECT
            message = await receive()
            if message["type"] == "http.disconnect":
                left.set()
                if not answering:  # gone before its body ended: nobody to tell that it is incomplete, so no 400 is built
                    progress.gone = True
                    raise asyncio.CancelledError
            elif not message.get("more_body", False):
                progress.phase = "preprocess"
                watcher = asyncio.get_running_loop().create_task(watch())
                # A reset that has already arrived takes the event loop a few turns to report (the failed read, the
                # server's connection_lost, then the watcher): given them, a client already gone is seen before its
                # body is parsed or its image decoded.
                for _ in range(LOOP_TURNS_TO_SEE_A_RESET):
                    await asyncio.sleep(0)
            return message

        async def app_send(message: Message) -> None:
            nonlocal answering
            answering = True  # set before the server sees the answer, whose end reads as a disconnect to the watcher
            await send(message)

        try:
            await self.app(scope, app_receive, app_send)
        except asyncio.CancelledError:
            if cancelled:
                task.uncancel()
            # ours, and nobody else's (a server shutting down cancels too): the request ends here, unanswered
            if not progress.gone or task.cancelling() > 0:
                raise
        finally:
            if watcher is not None:
                watcher.cancel()


def _request_id(headers: list[tuple[bytes, bytes]]) -> str | None:
    """The client's (or a proxy's) X-Request-ID, if it sent a usable one; without one, an id is made only when needed."""
    for name, value in headers:
        if name == b"x-request-id":
            return request_id(value.decode("latin-1"))
    return None


def _server_span(tracing: Tracing, scope: Scope, progress: Progress) -> RequestTrace | None:
    """The request's server span (HTTP semantic conventions); named by its route once routing has found it."""
    headers = ((k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"] if k in (b"traceparent", b"tracestate"))
    attributes = {"http.request.method": scope["method"], "url.path": scope["path"], "url.scheme": scope.get("scheme", "http")}
    progress.trace = tracing.start(scope["method"], SpanKind.SERVER, attributes, headers, progress)
    return progress.trace
