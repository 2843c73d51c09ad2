"""A token that changes with every change to the GPU catalog's tables, kept by the database itself.

Every single-tenant reconcile needs the catalog (flavors, node pools, cohorts, priority classes, per-cluster
offers): six queries and their objects, ~7 ms of CPU and ~10 ms of wall per event at 10,000 tenants
(benchmarks/reconcile.py), for rows an admin changes a few times a month. `scheduling.inputs.load_catalog`
keeps what it built per process and reuses it while this token stays the same: one query instead of six.

The token is written by database triggers, not by Django signals: a queryset `update()`, a `bulk_create`, a
raw statement, a restore or a `TRUNCATE` all fire them, so no code path can change the catalog behind the
cache's back. It is a random 63-bit number, never a counter: a transaction that changed the catalog and then
rolled back must not leave a value that a later, different change could write again (a rolled-back counter
would repeat, and a process that cached the rolled-back catalog under it would serve it). Each statement
that changes a catalog table draws a new one, inside its own transaction, so a transaction sees its own
changes' token and others see it once it commits.

The triggers are (re)installed after every `migrate` (post_migrate), so a database restored without them, or
migrated back and forth past the revision table, gets them again. A process checks once that they are all
there and caches nothing if not.
"""

from __future__ import annotations

from typing import Any

# The tables the catalog is built from (scheduling.inputs.load_catalog). Not scheduling_cluster: its status
# columns change on every apply, so load_catalog reads the clusters each time (one query, a few rows).
TABLES = (
    "scheduling_gpumodel",
    "scheduling_flavor",
    "scheduling_gpunodepool",
    "scheduling_cohort",
    "scheduling_priorityclass",
    "scheduling_clusterflavor",
)
_TRIGGER = "gpufleet_catalog_changed"


def postgresql_statements(tables: tuple[str, ...] = TABLES) -> list[str]:
    """One statement-level trigger per table (insert, update, delete, truncate) calling one function."""
    statements = [
        """CREATE OR REPLACE FUNCTION gpufleet_catalog_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO scheduling_catalogrevision (id, token) VALUES (1, floor(random() * 9.0e18)::bigint)
        ON CONFLICT (id) DO UPDATE SET token = EXCLUDED.token;
    RETURN NULL;
END $$"""
    ]
    for table in tables:
        statements += [
            f'DROP TRIGGER IF EXISTS {_TRIGGER} ON "{table}"',
            f'CREATE TRIGGER {_TRIGGER} AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON "{table}" '
            f"FOR EACH STATEMENT EXECUTE FUNCTION gpufleet_catalog_changed()",
        ]
    return statements


def install(connection: Any) -> None:
    """(Re)install the triggers on this database connection (idempotent). Not before the revision table
    exists (a database migrated back past it): triggers writing a missing table would fail every write."""
    if "scheduling_catalogrevision" not in connection.introspection.table_names():
        uninstall(connection)
        return
    with connection.cursor() as cursor:
        for statement in postgresql_statements():
            cursor.execute(statement)


def uninstall(connection: Any) -> None:
    """Drop the triggers (migrating back past the revision table)."""
    existing = set(connection.introspection.table_names())
    with connection.cursor() as cursor:
        for table in TABLES:
            if table in existing:  # DROP TRIGGER ... ON a missing table fails even with IF EXISTS
                cursor.execute(f'DROP TRIGGER IF EXISTS {_TRIGGER} ON "{table}"')
        cursor.execute("DROP FUNCTION IF EXISTS gpufleet_catalog_changed()")


def installed(connection: Any) -> bool:
    """Are all the triggers there? (Asked once per process and database.)"""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_trigger WHERE tgname = %s AND NOT tgisinternal", [_TRIGGER])
        return bool(cursor.fetchone()[0] == len(TABLES))


_CHECKED: dict[str, bool] = {}  # database name -> its triggers are installed


def current(connection: Any) -> int | None:
    """The catalog's token now, or None when it cannot be trusted (no row yet, triggers missing): then the
    caller builds the catalog afresh and caches nothing."""
    name = str(connection.settings_dict.get("NAME"))
    if name not in _CHECKED:
        _CHECKED[name] = installed(connection)
    if not _CHECKED[name]:
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT token FROM scheduling_catalogrevision WHERE id = 1")
        row = cursor.fetchone()
    return None if row is None else int(row[0])


def forget_checks() -> None:
    """After the triggers were (re)installed: ask again whether they are there."""
    _CHECKED.clear()


def after_migrate(using: str = "default", **_: Any) -> None:
    """post_migrate receiver: install the triggers on the migrated database."""
    from django.db import connections

    install(connections[using])
    forget_checks()
