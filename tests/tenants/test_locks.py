"""tenants.locks across two real processes: while one holds tenant_lock(k), the other waits for it.

The two children get different PYTHONHASHSEEDs on purpose: the first version keyed the lock on
`hash(name)`, which differs per process, so each process took a different lock and both "held" it.
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from django.db import connection

from tests.support.database import database_url
from tests.support.services import REPO

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.service]

HOLDER = Path(__file__).with_name("lock_holder.py")


def _database_url() -> str:
    return database_url(connection.settings_dict)


class Holder:
    """One child process and the lines it prints, read by a thread so waiting can time out."""

    def __init__(self, key: int, hash_seed: str) -> None:
        env = {**os.environ, "DATABASE_URL": _database_url(), "PYTHONHASHSEED": hash_seed,
               "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "platform")])}
        self.proc = subprocess.Popen([sys.executable, str(HOLDER), str(key)], cwd=REPO, env=env, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        try:
            for line in self.proc.stdout:
                self.lines.put(line.strip())
        except ValueError:  # closed by stop()
            pass

    def says(self, word: str, timeout: float) -> bool:
        try:
            while True:
                line = self.lines.get(timeout=timeout)
                if line == word:
                    return True
                if line not in {"waiting", "held", "released"}:
                    raise AssertionError(f"lock holder failed: {line}")
        except queue.Empty:
            return False

    def release(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("release\n")
        self.proc.stdin.flush()

    def stop(self) -> None:
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.proc.wait(timeout=10)
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()


def test_second_process_waits_for_the_first() -> None:
    first, second = Holder(39, hash_seed="1"), None
    try:
        assert first.says("held", timeout=60)
        second = Holder(39, hash_seed="2")
        assert second.says("waiting", timeout=60)
        assert not second.says("held", timeout=3), "two processes held tenant_lock(39) at the same time"
        first.release()
        assert first.says("released", timeout=30)
        assert second.says("held", timeout=30)
        second.release()
        assert second.says("released", timeout=30)
    finally:
        for holder in (first, second):
            if holder is not None:
                holder.stop()


def test_other_tenants_do_not_wait() -> None:
    first, second = Holder(39, hash_seed="1"), Holder(40, hash_seed="1")
    try:
        assert first.says("held", timeout=60)
        assert second.says("held", timeout=60)
    finally:
        first.release()
        second.release()
        first.stop()
        second.stop()
