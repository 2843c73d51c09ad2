"""A private `redis-server` on a free port, for tests that stop and restart the broker."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import redis

from .services import need_binary, running, wait_for


@contextmanager
def redis_server(port: int, workdir: Path) -> Iterator[subprocess.Popen]:
    """Run redis-server on 127.0.0.1:`port` (no persistence) for the block; stop it after."""
    binary = need_binary("redis-server")
    workdir.mkdir(parents=True, exist_ok=True)
    argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--dir", str(workdir)]
    with running(argv, workdir / f"redis-{port}.log", grace=5) as proc:
        client = redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=0.5)
        wait_for(lambda: bool(client.ping()), timeout=15, what=f"redis-server on port {port}")
        yield proc
