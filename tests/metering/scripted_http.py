"""A real HTTP server on a loopback port (stdlib `http.server` in a thread) that answers from a script.

Each request takes the next scripted `Reply` (the last one repeats), so tests can serve recorded
upstream bodies, 500s, slow answers (to trigger client timeouts) and garbage, and then count what the
client actually sent.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from tests.support.services import free_port


@dataclass(frozen=True)
class Reply:
    status: int = 200
    body: bytes | str = b"{}"
    delay: float = 0.0
    content_type: str = "application/json"


@dataclass
class Script:
    replies: list[Reply]
    requests: list[dict] = field(default_factory=list)
    url: str = ""

    def next_reply(self) -> Reply:
        index = min(len(self.requests) - 1, len(self.replies) - 1)
        return self.replies[index]


@contextmanager
def serve(*replies: Reply) -> Iterator[Script]:
    script = Script(list(replies))

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length).decode() if length else ""
            script.requests.append({"method": self.command, "path": parts.path,
                                    "query": parse_qs(parts.query), "form": parse_qs(body)})
            reply = script.next_reply()
            if reply.delay:
                time.sleep(reply.delay)
            payload = reply.body.encode() if isinstance(reply.body, str) else reply.body
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.content_type)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout test)

        do_GET = _answer
        do_POST = _answer

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    server.daemon_threads = True
    script.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield script
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
