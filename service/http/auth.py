"""Optional API keys: who may run the models and read the service's internals.

Off by default, as a public demo needs. With CAPSNET_API_KEYS_FILE (one key a line; blank lines and `#` comments
skipped), every request but the probes and the page itself needs `Authorization: Bearer <key>`: the models (REST and the
Open Inference Protocol, gRPC too: service/oip/grpc_server.py), the card (/model), /metrics. Open: /healthz, /readyz,
/v2/health/*, the page, its scripts, the decoder files it runs, the dimension atlas and test pairs it shows, and
/openapi.json, so that a person can read how to ask and a prober needs no secret. A key is compared with every
configured key in constant time (hmac), so the time of an answer says nothing of how much of a key was right. A refusal
is a 401 with `WWW-Authenticate: Bearer`, in the REST error body or, under /v2, the protocol's.
"""

from __future__ import annotations

import hmac
from pathlib import Path
from typing import Any

import orjson
from starlette.types import ASGIApp, Receive, Scope, Send

from service.errors import error_body, is_protocol

# the probes, and what the page shows without running a model: itself, the atlas of pose dimensions, MNIST's test pairs
OPEN_PATHS = frozenset(
    {"/", "/healthz", "/readyz", "/v2/health/live", "/v2/health/ready", "/openapi.json", "/dimensions", "/multimnist/sample"}
)
OPEN_PREFIXES = ("/static/", "/decoders/")
CHALLENGE = (b"www-authenticate", b'Bearer realm="capsnet"')
ASK = "this server wants an API key: Authorization: Bearer <key>"


class KeysError(ValueError):
    """The keys file cannot be used: missing, unreadable, or without a key."""


def load_keys(path: Path) -> tuple[bytes, ...]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise KeysError(f"API keys file unreadable: {path}: {e}") from e
    keys = tuple(line.strip().encode() for line in lines if line.strip() and not line.strip().startswith("#"))
    if not keys:
        raise KeysError(f"API keys file {path} holds no key (one a line; # starts a comment)")
    return keys


def bearer(value: bytes | str | None) -> bytes | None:
    """The token of an `Authorization: Bearer <token>` value, else None."""
    if value is None:
        return None
    raw = value.encode("latin-1") if isinstance(value, str) else value
    scheme, _, token = raw.strip().partition(b" ")
    if scheme.lower() != b"bearer":
        return None
    return token.strip() or None


def allowed(token: bytes | None, keys: tuple[bytes, ...]) -> bool:
    """Whether `token` is one of `keys`, every key compared in full whatever the others gave."""
    if token is None:
        return False
    matches = [hmac.compare_digest(token, key) for key in keys]
    return any(matches)


def is_open(path: str) -> bool:
    return path in OPEN_PATHS or path.startswith(OPEN_PREFIXES)


def documented(schema: dict[str, Any]) -> dict[str, Any]:
    """The OpenAPI document of a server that wants keys: the bearer scheme, and on every operation that needs one the
    requirement and its 401, in the REST error body or, under /v2, the protocol's. (A server without keys documents
    neither: its operations never answer 401.)"""
    schemes = schema.setdefault("components", {}).setdefault("securitySchemes", {})
    schemes["apiKey"] = {"type": "http", "scheme": "bearer", "description": "a key of the server's CAPSNET_API_KEYS_FILE"}
    for path, operations in schema["paths"].items():
        if is_open(path):
            continue
        body = "OIPErrorBody" if is_protocol(path) else "ErrorBody"
        for operation in operations.values():
            operation["security"] = [{"apiKey": []}]
            operation.setdefault("responses", {})["401"] = {
                "description": "no API key, or one this server does not hold (WWW-Authenticate: Bearer)",
                "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{body}"}}},
            }
    return schema


class ApiKeyMiddleware:
    """Pure ASGI, inside EdgeMiddleware so that a refusal is counted like any answer."""

    def __init__(self, app: ASGIApp, keys: tuple[bytes, ...]) -> None:
        self.app = app
        self.keys = keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or is_open(scope["path"]):
            return await self.app(scope, receive, send)
        token = bearer(next((v for k, v in scope["headers"] if k == b"authorization"), None))
        if allowed(token, self.keys):
            return await self.app(scope, receive, send)
        detail = ASK if token is None else "that API key is not one of this server's"
        body = orjson.dumps({"error": detail} if is_protocol(scope["path"]) else error_body("unauthorized", detail))
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), CHALLENGE]
        await send({"type": "http.response.start", "status": 401, "headers": headers})
        await send({"type": "http.response.body", "body": body})
