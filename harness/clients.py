"""Requests as their bytes on the wire, and clients that leave without their answer. Built once, a request costs the
load generator next to nothing to send again (why that matters: bench/loadgen.py); and only a raw socket can leave
mid-request as a killed process or an impatient caller does. The tests put the service and the edge through those
clients with the same bytes the benchmarks measure them with. Only ever pointed at loopback."""

from __future__ import annotations

import asyncio
import socket
import struct

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def build_request(host: str, port: int, path: str, body: bytes, content_type: str) -> bytes:
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: keep-alive\r\n\r\n"
    )
    return head.encode() + body


def multipart_png(png: bytes, boundary: str = "capsnetbench") -> tuple[bytes, str]:
    body = (
        (f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="digit.png"\r\nContent-Type: image/png\r\n\r\n').encode()
        + png
        + f"\r\n--{boundary}--\r\n".encode()
    )
    return body, f"multipart/form-data; boundary={boundary}"


async def vanish(host: str, port: int, request: bytes, how: str, wait_s: float = 0.0) -> None:
    """One client that leaves without its answer: the whole request (or half of it, `mid_body`) sent, then, after
    `wait_s`, the connection reset (SO_LINGER 0: an RST, as a killed process's socket), or closed (`closed`: a FIN, as a
    client that gave up closes its socket)."""
    if host not in LOOPBACK:
        raise ValueError(f"only loopback, not {host}")
    try:
        reader, writer = await asyncio.open_connection(host, port)
    except OSError:
        return
    try:
        writer.write(request[: len(request) // 2] if how == "mid_body" else request)
        await writer.drain()
        if wait_s:
            await asyncio.sleep(wait_s)
    except OSError:
        pass
    finally:
        if how == "closed":
            writer.close()
        else:
            sock = writer.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
