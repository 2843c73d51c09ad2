"""The fleet's data version: one number that every committed write to the platform's tables increases.

The API's answer cache (answercache.py) keys each answer by it, so an answer is never served after a write
that could change it. It is kept by PostgreSQL itself, not by Python code, because rows are written from
many places -- actions, the Django admin, `QuerySet.update()` / `bulk_update()` / `bulk_create()`, raw SQL
(tenants/fleet.py), `COPY` (billing/actions.py), management commands, Celery tasks -- and a trigger sees
them all:

- every watched table has a statement-level trigger (`AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE`) that
  appends a row to `gpufleet_data_change` (an insert: it locks nothing another transaction waits for);
- that table has a deferred constraint trigger, so it runs at COMMIT, and only for the transaction's last
  change row it increases `gpufleet_data_version.version` and deletes the transaction's change rows.

So the new version becomes visible in the same instant as the data (same transaction), a rolled-back
transaction changes nothing, and the single version row is locked only from the commit's trigger to the end
of that commit. The bump is the transaction's last deferred event on a watched table (the change row of
its last statement is queued after that statement's own deferred foreign-key checks): a transaction that
holds the version row is committing and waits for no row another transaction holds -- unless it wrote an
unwatched table (below) after its last watched write. PostgreSQL would then detect the cycle and abort one.

Unwatched tables: written on reads or sign-ins, and shown by no cached answer (a test checks that every
other table has the trigger). `post_migrate` installs the trigger on tables that a later migration adds.
"""

from __future__ import annotations

from typing import Any

from django.db import connections

VERSION_TABLE = "gpufleet_data_version"
CHANGE_TABLE = "gpufleet_data_change"
TRIGGER = "gpufleet_data_changed"
# API tokens (last_used_at, once a minute per token), sessions and idempotency keys are written by reads and
# sign-ins; no cached answer shows them. Watching them would only empty the cache every minute.
UNWATCHED = frozenset({"accounts_apitoken", "django_session", "gpufleet_api_idempotencykey", "django_migrations",
                       VERSION_TABLE, CHANGE_TABLE})

INSTALL_SQL = f"""
CREATE TABLE IF NOT EXISTS {VERSION_TABLE} (
    id smallint PRIMARY KEY CHECK (id = 1),
    version bigint NOT NULL
);
INSERT INTO {VERSION_TABLE} (id, version) VALUES (1, 1) ON CONFLICT (id) DO NOTHING;
CREATE TABLE IF NOT EXISTS {CHANGE_TABLE} (
    id bigserial PRIMARY KEY,
    txid bigint NOT NULL DEFAULT txid_current()
);
CREATE INDEX IF NOT EXISTS {CHANGE_TABLE}_txid ON {CHANGE_TABLE} (txid, id);

CREATE OR REPLACE FUNCTION {TRIGGER}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {CHANGE_TABLE} DEFAULT VALUES;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION gpufleet_data_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Deferred events fire in the order they were queued: only the last change row of the transaction
    -- bumps, so the version row is locked as late as possible (module docstring).
    IF NOT EXISTS (SELECT 1 FROM {CHANGE_TABLE} WHERE txid = NEW.txid AND id > NEW.id) THEN
        UPDATE {VERSION_TABLE} SET version = version + 1 WHERE id = 1;
        DELETE FROM {CHANGE_TABLE} WHERE txid = NEW.txid;
    END IF;
    RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS gpufleet_data_commit ON {CHANGE_TABLE};
CREATE CONSTRAINT TRIGGER gpufleet_data_commit AFTER INSERT ON {CHANGE_TABLE}
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION gpufleet_data_commit();
"""  # noqa: S608  (only this module's constant names)

UNINSTALL_SQL = f"""
DROP TABLE IF EXISTS {CHANGE_TABLE};
DROP TABLE IF EXISTS {VERSION_TABLE};
DROP FUNCTION IF EXISTS gpufleet_data_commit() CASCADE;
DROP FUNCTION IF EXISTS {TRIGGER}() CASCADE;
"""


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
    """Give every watched table that lacks it the change trigger; returns the tables changed.

    Runs after every `migrate` (post_migrate), so a table a later migration creates is watched from then
    on; it first asks the catalog, so a `flush` (which also sends post_migrate) costs one query."""
    connection = connections[using]
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s)", [VERSION_TABLE])
        if cursor.fetchone()[0] is None:  # migrations before gpufleet_api 0002: nothing to install yet
            return []
    missing = [t for t in watched_tables(connection) if t not in tables_with_trigger(connection)]
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        for table in missing:
            cursor.execute(f"CREATE TRIGGER {TRIGGER} AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {quote(table)} "
                           f"FOR EACH STATEMENT EXECUTE FUNCTION {TRIGGER}()")
    return missing


VERSION_SQL = f"SELECT version FROM {VERSION_TABLE} WHERE id = 1"  # noqa: S608 (a constant name)


def read_version(using: str = "default") -> int | None:
    """The committed data version as this connection sees it now, or None before its migration ran."""
    connection = connections[using]
    with connection.cursor() as cursor:
        cursor.execute(VERSION_SQL)
        row = cursor.fetchone()
    return None if row is None else int(row[0])
