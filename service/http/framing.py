"""Requests that are not HTTP at all, answered as every other refusal: in JSON.

uvicorn (httptools) answers a request it cannot parse (a broken request line, header or chunk) with a plain-text 400 and
closes the connection; the app never sees it. A client that reads the body of every 4xx as the service's JSON error
gets one here too, with the same shape and a detail that says what was wrong and that the connection is closed.
"""

from __future__ import annotations

import orjson
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from service.errors import error_body

DETAIL = "malformed HTTP request (its request line, a header or the chunked body): the connection is closed"


class JSONFramingErrors(HttpToolsProtocol):
    def send_400_response(self, msg: str) -> None:
        body = orjson.dumps(error_body("bad_request", DETAIL))
        head = [STATUS_LINE[400]]
        for name, value in self.server_state.default_headers:
            head += [name, b": ", value, b"\r\n"]
        head += [
            b"content-type: application/json\r\n",
            b"content-length: " + str(len(body)).encode("ascii") + b"\r\n",
            b"connection: close\r\n\r\n",
        ]
        self.transport.write(b"".join(head) + body)
        self.transport.close()
