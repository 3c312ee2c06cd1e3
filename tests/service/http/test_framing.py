"""Bytes that are not an HTTP request, sent to the real server: answered 400 in the service's JSON error body, as every
other refusal, and the connection closed; the server serves the next client as before."""

from __future__ import annotations

import json
import socket

import pytest

# a header line without a colon, a length that is not a number, a chunk size that is not hex
MALFORMED = [
    b"GET /healthz HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n",
    b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Length: ten\r\n\r\n",
    b"POST /predict HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
]


def exchange(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(request)
        out = b""
        while chunk := s.recv(65536):  # the server closes the connection after its answer
            out += chunk
    return out


@pytest.mark.parametrize("request_bytes", MALFORMED, ids=["header", "length", "chunk"])
def test_a_request_that_is_not_http_is_a_json_400_and_the_connection_closes(server, request_bytes):
    head, _, body = exchange(server.port, request_bytes).partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    assert lines[0] == "HTTP/1.1 400 Bad Request"
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    assert headers["content-type"] == "application/json" and headers["connection"] == "close"
    assert int(headers["content-length"]) == len(body)
    assert json.loads(body) == {
        "error": "bad_request",
        "detail": "malformed HTTP request (its request line, a header or the chunked body): the connection is closed",
    }
    assert b'"status":"ok"' in exchange(server.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
