"""One reconcile per tenant at a time, across processes (PostgreSQL advisory locks).

The lock is PostgreSQL's two-integer advisory lock `(namespace, key)`: the namespace is a FIXED number per
kind of lock (below), the key the row's primary key. Both are the same in every process. (The first version
derived the namespace from `hash(name)`, which Python salts per process, so two workers took different locks
for the same tenant.) It is the session form (`pg_advisory_lock`), not `pg_advisory_xact_lock`, because a
reconcile spans several transactions (status writes before and after the backend's apply); it is released
in `finally`, and PostgreSQL releases it too if the connection dies.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection

# Fixed namespace numbers ("gpf" + a kind number): stable across processes, releases and Python versions,
# and apart from anyone else's advisory locks on a shared database. Never reuse or renumber one.
NAMESPACES = {"tenant": 0x6770_6601}
_INT4 = range(-(2**31), 2**31)


@contextmanager
def exclusive(name: str, key: int) -> Iterator[None]:
    """Hold the exclusive lock (NAMESPACES[name], key) for the block; waits while another session holds it."""
    namespace = NAMESPACES[name]
    if key not in _INT4:  # the two-integer form takes int4 keys; a bigger pk would be an error, not a wrap
        raise ValueError(f"advisory lock key {key} does not fit in a 32-bit integer")
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(%s, %s)", [namespace, key])
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [namespace, key])


def tenant_lock(tenant_id: int) -> object:
    return exclusive("tenant", tenant_id)


def try_exclusive_many(name: str, keys: list[int]) -> list[int]:
    """Take (NAMESPACES[name], key) for every key that no other session holds, in ONE statement, without
    waiting: the keys taken (the caller holds them until `release_many`). Never waiting is what makes holding
    many at once safe: a session that holds one of them is simply left to the caller's one-by-one path, so
    no two sessions can wait on each other."""
    if not keys:
        return []
    for key in keys:
        if key not in _INT4:
            raise ValueError(f"advisory lock key {key} does not fit in a 32-bit integer")
    with connection.cursor() as cursor:
        cursor.execute("SELECT k FROM unnest(%s::int[]) AS k WHERE pg_try_advisory_lock(%s, k)",
                       ["{" + ",".join(map(str, keys)) + "}", NAMESPACES[name]])
        return [row[0] for row in cursor.fetchall()]


def release_many(name: str, keys: list[int]) -> None:
    """Release what `try_exclusive_many` took, in one statement."""
    if not keys:
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_unlock(%s, k) FROM unnest(%s::int[]) AS k",
                       [NAMESPACES[name], "{" + ",".join(map(str, keys)) + "}"])
