"""A request body must arrive within GPUFLEET_BODY_TIMEOUT_SECONDS (issue 27 item 10: slow bodies).

gunicorn's gthread workers read a request's body in the request's thread, with no read timeout: a client that
sends its headers and then a byte now and then holds a thread for as long as it likes, and twelve such clients
held every thread of the chart's web pod (2 workers x 4 threads), so every other request waited. Here the whole
body is read before Django sees the request, on a socket whose timeout is the time left until the deadline;
a body that is late is answered 408 and the connection closed, which frees the thread after at most the
deadline. What Django then reads is the buffered body (in memory up to 1 MiB, then a temporary file).

Only under gunicorn (it hands the client socket over as `gunicorn.socket`) and only for bodies with a
Content-Length; elsewhere (tests, the demo's runserver) the application is called unchanged.
"""

from __future__ import annotations

import json
import socket
import tempfile
import time
from collections.abc import Callable, Iterable
from typing import Any

CHUNK = 64 * 1024
IN_MEMORY = 1024 * 1024


class BodyTimeout(Exception):
    pass


def _read_body(environ: dict[str, Any], sock: socket.socket, length: int, deadline: float) -> Any:
    body = tempfile.SpooledTemporaryFile(max_size=IN_MEMORY)  # handed to Django as wsgi.input
    stream = environ["wsgi.input"]
    left = length
    try:
        while left > 0:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BodyTimeout()
            sock.settimeout(remaining)
            try:
                data = stream.read(min(CHUNK, left))
            except TimeoutError as exc:  # socket.timeout
                raise BodyTimeout() from exc
            if not data:
                break  # the client closed early: Django sees a short body, as without this wrapper
            body.write(data)
            left -= len(data)
    finally:
        sock.settimeout(None)  # back to blocking for the response and keep-alive
    body.seek(0)
    return body


def deadline_for_bodies(app: Callable, seconds: float) -> Callable:
    def wrapped(environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        sock = environ.get("gunicorn.socket")
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if sock is None or length <= 0 or seconds <= 0:
            return app(environ, start_response)
        try:
            environ["wsgi.input"] = _read_body(environ, sock, length, time.monotonic() + seconds)
        except BodyTimeout:
            reason = f"the request body did not arrive within {seconds:g} seconds"
            problem = {"type": "urn:gpufleet:problem:request_timeout", "title": "Request Timeout", "status": 408,
                       "detail": reason, "error": "request_timeout", "errors": [{"field": "", "reason": reason}]}
            payload = json.dumps(problem).encode()
            start_response("408 Request Timeout", [("Content-Type", "application/problem+json"),
                                                   ("Content-Length", str(len(payload))), ("Connection", "close")])
            return [payload]
        return app(environ, start_response)

    return wrapped
