"""The platform's data versions: what the caches of the API and of the GPU catalog are keyed by (docs/adr/0004).

One statement-level trigger, `gpufleet_data_changed`, on every watched table, installed by migrations
(gpufleet_api 0002 and 0003; a migration that creates a table adds `watch_new_tables()`), keeps two kinds
of figure. The database keeps them, not Python code, because rows are written from
many places -- actions, the Django admin, `QuerySet.update()` / `bulk_update()` / `bulk_create()`, raw SQL
(tenants/fleet.py), `COPY` (gpufleet/core/pgcopy.py), management commands, Celery tasks, a restore -- and a
trigger sees them all.

- The committed data version (`gpufleet_data_version`, one row), which the API's answer cache keys answers by
  (answercache.py). The trigger appends a row to `gpufleet_data_change` (an insert: it locks nothing another
  transaction waits for); that table has a deferred constraint trigger, so it runs at COMMIT, and only for the
  transaction's last change row it increases the version and deletes the transaction's change rows. So the new
  version becomes visible in the same instant as the data (same transaction), a rolled-back transaction changes
  nothing, and the row is locked only from the commit's trigger to the end of that commit. The bump is the
  transaction's last deferred event on a watched table (the change row of its last statement is queued after
  that statement's own deferred foreign-key checks): a transaction that holds the row is committing and waits
  for no row another transaction holds -- unless it wrote an unwatched table (below) after its last watched
  write. PostgreSQL would then detect the cycle and abort one.
- A scope's token (`gpufleet_data_token`, one row per scope; `catalog`: scheduling.catalog.revision), for a
  per-process cache that must also be right inside the transaction that changed its tables. The tables of a scope
  carry its name as the trigger's argument (`watch_scope`), and each statement on one redraws the token at once,
  inside its transaction: the transaction sees its own changes' token, others see it once it commits. A random
  63-bit number, never a counter: a transaction that changed the tables and then rolled back must not leave a
  value that a later, different change could write again (a process that cached the rolled-back rows under it
  would serve them).

Unwatched tables: written on reads or sign-ins, and shown by no cached answer (a test checks that every
other table has the trigger).
"""

from __future__ import annotations

from typing import Any

from django.db import connections

VERSION_TABLE = "gpufleet_data_version"
CHANGE_TABLE = "gpufleet_data_change"
TOKEN_TABLE = "gpufleet_data_token"
TRIGGER = "gpufleet_data_changed"
# API tokens (last_used_at, once a minute per token), sessions and idempotency keys are written by reads and
# sign-ins; no cached answer shows them. Watching them would only empty the cache every minute.
UNWATCHED = frozenset({"accounts_apitoken", "django_session", "gpufleet_api_idempotencykey", "django_migrations",
                       VERSION_TABLE, CHANGE_TABLE, TOKEN_TABLE})


def watched_tables(connection: Any) -> list[str]:
    """Every table of an installed model (auto-created many-to-many tables included) except UNWATCHED."""
    tables = connection.introspection.django_table_names(only_existing=True, include_views=False)
    return sorted(t for t in tables if t not in UNWATCHED)


def tables_with_trigger(connection: Any) -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT c.relname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
                       "JOIN pg_namespace n ON n.oid = c.relnamespace "
                       "WHERE t.tgname = %s AND n.nspname = current_schema()", [TRIGGER])
        return {row[0] for row in cursor.fetchall()}


def install_triggers(using: str = "default", **_: Any) -> list[str]:
    """Give every watched table that lacks it the change trigger; returns the tables changed. Idempotent:
    run by the migrations that create tables (`watch_new_tables`), and by tests that removed a trigger."""
    connection = connections[using]
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s)", [VERSION_TABLE])
        if cursor.fetchone()[0] is None:  # migrations before gpufleet_api 0002: nothing to install yet
            return []
    missing = [t for t in watched_tables(connection) if t not in tables_with_trigger(connection)]
    with connection.cursor() as cursor:
        for table in missing:
            cursor.execute(_create_trigger(connection, table, None))
    return missing


def _create_trigger(connection: Any, table: str, scope: str | None) -> str:
    argument = "" if scope is None else "'" + scope.replace("'", "''") + "'"
    return (f"CREATE TRIGGER {TRIGGER} AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON "
            f"{connection.ops.quote_name(table)} FOR EACH STATEMENT EXECUTE FUNCTION {TRIGGER}({argument})")


def _install_new(apps: Any, schema_editor: Any) -> None:
    install_triggers(schema_editor.connection.alias)


def watch_new_tables() -> Any:
    """The migration operation that gives the tables created before it their trigger: add it to a migration
    that creates a table (tests/api/test_answer_cache.py fails for a table without one)."""
    from django.db import migrations

    return migrations.RunPython(_install_new, migrations.RunPython.noop, elidable=False)


def watch_scope(connection: Any, tables: tuple[str, ...], scope: str | None) -> None:
    """Make `tables` redraw `scope`'s token on every change (None: plain data-version triggers again), and
    draw a first token. Called by the owning app's migration (scheduling 0012 for the catalog)."""
    with connection.cursor() as cursor:
        for table in tables:
            cursor.execute(f"DROP TRIGGER IF EXISTS {TRIGGER} ON {connection.ops.quote_name(table)}")
            cursor.execute(_create_trigger(connection, table, scope))
        if scope is not None:
            cursor.execute(f"INSERT INTO {TOKEN_TABLE} (name, token) VALUES (%s, floor(random() * 9.0e18)::bigint) "  # noqa: S608
                           "ON CONFLICT (name) DO UPDATE SET token = EXCLUDED.token", [scope])  # (a constant name)
    forget_checks()


def scope_installed(connection: Any, tables: tuple[str, ...], scope: str) -> bool:
    """Do all of `tables` redraw `scope`'s token?"""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(DISTINCT c.relname) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
                       "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE t.tgname = %s AND "
                       "n.nspname = current_schema() AND c.relname = ANY(%s) AND t.tgargs = %s",
                       [TRIGGER, list(tables), scope.encode() + b"\0"])
        return bool(cursor.fetchone()[0] == len(tables))


_CHECKED: dict[tuple[str, str], bool] = {}  # (database name, scope) -> its triggers are all installed


def forget_checks() -> None:
    """After triggers were (re)installed or dropped: ask again whether a scope's are all there."""
    _CHECKED.clear()


def scope_token(connection: Any, tables: tuple[str, ...], scope: str) -> int | None:
    """The scope's token now, or None when it cannot be trusted (no row yet, a trigger missing: checked once
    per process and database): then the caller builds afresh and caches nothing."""
    key = (str(connection.settings_dict.get("NAME")), scope)
    if key not in _CHECKED:
        _CHECKED[key] = scope_installed(connection, tables, scope)
    if not _CHECKED[key]:
        return None
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT token FROM {TOKEN_TABLE} WHERE name = %s", [scope])  # noqa: S608
        row = cursor.fetchone()
    return None if row is None else int(row[0])


VERSION_SQL = f"SELECT version FROM {VERSION_TABLE} WHERE id = 1"  # noqa: S608 (a constant name)


def read_version(using: str = "default") -> int | None:
    """The committed data version as this connection sees it now, or None before its migration ran."""
    connection = connections[using]
    with connection.cursor() as cursor:
        cursor.execute(VERSION_SQL)
        row = cursor.fetchone()
    return None if row is None else int(row[0])
