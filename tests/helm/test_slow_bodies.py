"""Issue 27 item 10: slow request bodies cannot block the web server.

gunicorn is started with the web container's command and arguments as the chart renders them (gthread,
web.workers x web.threads); only the listen address is swapped for a loopback port. Twelve clients send their
headers and then a body one byte at a time; a thirteenth client's request must still be answered promptly.
Before, each slow body held a gthread thread for as long as the client kept sending (no read timeout), so
twelve of them held all eight threads and the thirteenth waited for them.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import requests

from tests.support.services import REPO, free_port, port_open, wait_for

from .chart import containers, render
from .test_processes import VENV_BIN, Process

SLOW_CLIENTS = 12
PROMPT_SECONDS = 10.0


def test_twelve_slow_bodies_do_not_block_a_thirteenth_request(tmp_path: Path) -> None:
    web = containers(render().get("Deployment", "gpufleet-web"))[0]
    port = free_port()
    argv = [*web["command"], *(f"--bind=127.0.0.1:{port}" if a.startswith("--bind=") else a for a in web["args"])]
    threads = int(next(a for a in web["args"] if a.startswith("--threads=")).split("=")[1])
    workers = int(next(a for a in web["args"] if a.startswith("--workers=")).split("=")[1])
    assert SLOW_CLIENTS > threads * workers  # more slow clients than the chart's request threads
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "gpufleet.settings.test",
           "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "platform")]),
           "PATH": f"{VENV_BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
    process = Process(argv, env, tmp_path / "web.log")
    slow: list[socket.socket] = []
    try:
        wait_for(lambda: port_open(port) or not process.alive(), timeout=60, what="gunicorn")
        assert process.alive(), process.output()[-3000:]
        assert requests.get(f"http://127.0.0.1:{port}/login/", timeout=30).status_code == 200  # warm
        # A sign-in form: Django's CSRF check reads the form body before any view runs (no session needed).
        body = b"username=someone&password=" + b"x" * 4000
        for _ in range(SLOW_CLIENTS):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"POST /login/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      b"Content-Type: application/x-www-form-urlencoded\r\n"
                      b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body[:1])
            slow.append(s)
        time.sleep(2)  # every request thread has picked up a slow request by now
        for s in slow:  # still sending: one more byte each
            s.sendall(body[1:2])
        started = time.monotonic()
        answer = requests.get(f"http://127.0.0.1:{port}/login/", timeout=PROMPT_SECONDS + 20)
        waited = time.monotonic() - started
        assert answer.status_code == 200
        assert waited < PROMPT_SECONDS, f"the 13th request waited {waited:.1f}s"
        # The slow clients themselves: a 408 once the body deadline passed, the connection closed.
        slow[0].settimeout(PROMPT_SECONDS + 10)
        first = slow[0].recv(65536)
        assert first.startswith(b"HTTP/1.1 408"), first[:200]
        # A body that arrives in time is not affected (the sign-in form's own answer, not a 408).
        sent = time.monotonic()
        normal = requests.post(f"http://127.0.0.1:{port}/login/", data={"username": "a", "password": "b"},
                               timeout=30)
        assert normal.status_code in (200, 403) and time.monotonic() - sent < PROMPT_SECONDS, normal.status_code
        # ... nor one that pauses within the deadline (a slow link, not a stalled client).
        with socket.create_connection(("127.0.0.1", port), timeout=30) as pausing:
            pausing.sendall(b"POST /login/ HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                            b"Content-Type: application/x-www-form-urlencoded\r\n"
                            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body[:100])
            time.sleep(0.5)
            pausing.sendall(body[100:])
            status = pausing.recv(65536).split(b"\r\n", 1)[0]
        assert status in (b"HTTP/1.1 200 OK", b"HTTP/1.1 403 Forbidden"), status
        print(f"13th request answered in {waited:.2f}s with {SLOW_CLIENTS} slow bodies")
    finally:
        for s in slow:
            s.close()
        process.stop()
