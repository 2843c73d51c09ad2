"""One reconcile per tenant at a time, across workers (PostgreSQL advisory locks)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection

# Keeps gpufleet's advisory locks apart from anyone else's on a shared database.
_LOCK_SPACE = 0x6770_6600
_local_locks: dict[str, threading.Lock] = {}
_local_guard = threading.Lock()


@contextmanager
def exclusive(name: str, key: int) -> Iterator[None]:
    """Hold an exclusive lock named (name, key) for the block."""
    if connection.vendor == "postgresql":
        space = _LOCK_SPACE + (hash(name) & 0xFF)
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s, %s)", [space, key])
        try:
            yield
        finally:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [space, key])
    else:
        # SQLite (the embedded demo) runs one process; a process-local lock is enough there.
        with _local_guard:
            lock = _local_locks.setdefault(f"{name}:{key}", threading.Lock())
        with lock:
            yield


def tenant_lock(tenant_id: int) -> object:
    return exclusive("tenant", tenant_id)
