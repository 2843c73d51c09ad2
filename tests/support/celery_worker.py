"""A real Celery worker process over real Redis, pointed at the test database."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import redis
from django.conf import settings
from django.db import connection

from .database import database_url as url_of
from .services import REPO, missing, running


def broker_url() -> str:
    return os.environ.get("CELERY_BROKER_URL", settings.CELERY_BROKER_URL)


def redis_available(url: str) -> bool:
    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=1).ping())
    except redis.exceptions.RedisError:
        return False


@contextmanager
def celery_worker(gitops_repo: Path, log_path: Path, *, broker: str | None = None, queue: str | None = None,
                  pool: str = "solo", own_session: bool = False, database_url: str | None = None) -> Iterator[str]:
    """Start `celery worker` on a private queue (or `queue`); yield the queue name; stop it.

    `database_url`: the test database through another address (a fault test's proxy it can cut).
    `own_session` puts the worker (and its pool children) in a process group of its own, so that a
    fault test can kill the whole group with SIGKILL (`kill_group`).
    """
    url = broker or broker_url()
    if not url.startswith("redis://") or not redis_available(url):
        missing(f"Redis broker not reachable at {url}")
    db = connection.settings_dict
    queue = queue or f"test-{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "gpufleet.settings.test",
        "DATABASE_URL": database_url or url_of(db),
        "CELERY_BROKER_URL": url,
        "CELERY_TASK_DEFAULT_QUEUE": queue,
        "GPUFLEET_GITOPS_REPO": str(gitops_repo),
        "GPUFLEET_REFERENCE_DIR": str(settings.GPUFLEET_REFERENCE_DIR),
        "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "platform")]),
    }
    argv = [sys.executable, "-m", "celery", "-A", "gpufleet", "worker", f"--pool={pool}", "--concurrency=1",
            "-Q", queue, "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "INFO"]
    with running(argv, log_path, grace=20, env=env, cwd=REPO, start_new_session=own_session) as proc:
        worker_processes[queue] = proc
        try:
            yield queue
        finally:
            worker_processes.pop(queue, None)


# The worker process of each running `celery_worker`, by queue (for fault tests that kill it).
worker_processes: dict[str, subprocess.Popen] = {}


def kill_group(queue: str) -> None:
    """SIGKILL the worker of `queue` and every process of its group: no shutdown, no ack, no requeue."""
    proc = worker_processes[queue]
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def wait_until(what: str, check: Callable[[], bool], log: Path, timeout: float = 60) -> None:
    """Poll `check` until it holds; on timeout fail with the worker's log, which says why."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"never happened: {what}; worker log:\n{log.read_text()[-4000:]}")
