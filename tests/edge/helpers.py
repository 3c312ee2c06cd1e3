"""What the tests that run HAProxy share."""

from __future__ import annotations

import socket

from harness.edge import haproxy_binary
from tests.needs import missing


def need_haproxy() -> None:
    """Skip without Debian's `haproxy`, with one line saying what to install; CAPSNET_REQUIRE_EDGE=1 (CI) fails instead."""
    if haproxy_binary() is None:
        missing("edge", "HAProxy is not installed (apt-get install haproxy)")


def raw_request(port: int, method: str, path: str) -> tuple[int, bytes]:
    """One request with its path exactly as given, on a connection of its own: (status, body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode())
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), body
