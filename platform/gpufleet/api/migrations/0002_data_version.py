"""The fleet's data version and the triggers that keep it (gpufleet/api/dataversion.py).

The SQL is this migration's own, as it was when the migration was written: 0003 changes the table and the
functions, and a migration must do the same thing whenever it runs."""

from typing import Any

from django.db import migrations

INSTALL_SQL = """
CREATE TABLE IF NOT EXISTS gpufleet_data_version (
    id smallint PRIMARY KEY CHECK (id = 1),
    version bigint NOT NULL
);
INSERT INTO gpufleet_data_version (id, version) VALUES (1, 1) ON CONFLICT (id) DO NOTHING;
CREATE TABLE IF NOT EXISTS gpufleet_data_change (
    id bigserial PRIMARY KEY,
    txid bigint NOT NULL DEFAULT txid_current()
);
CREATE INDEX IF NOT EXISTS gpufleet_data_change_txid ON gpufleet_data_change (txid, id);

CREATE OR REPLACE FUNCTION gpufleet_data_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO gpufleet_data_change DEFAULT VALUES;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION gpufleet_data_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Deferred events fire in the order they were queued: only the last change row of the transaction
    -- bumps, so the version row is locked as late as possible (dataversion's docstring).
    IF NOT EXISTS (SELECT 1 FROM gpufleet_data_change WHERE txid = NEW.txid AND id > NEW.id) THEN
        UPDATE gpufleet_data_version SET version = version + 1 WHERE id = 1;
        DELETE FROM gpufleet_data_change WHERE txid = NEW.txid;
    END IF;
    RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS gpufleet_data_commit ON gpufleet_data_change;
CREATE CONSTRAINT TRIGGER gpufleet_data_commit AFTER INSERT ON gpufleet_data_change
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION gpufleet_data_commit();
"""

UNINSTALL_SQL = """
DROP TABLE IF EXISTS gpufleet_data_change;
DROP TABLE IF EXISTS gpufleet_data_version;
DROP FUNCTION IF EXISTS gpufleet_data_commit() CASCADE;
DROP FUNCTION IF EXISTS gpufleet_data_changed() CASCADE;
"""


def install(apps: Any, schema_editor: Any) -> None:
    from gpufleet.api import dataversion

    schema_editor.execute(INSTALL_SQL)
    # The tables migrated before this one; 0003 gives the later ones theirs.
    dataversion.install_triggers(schema_editor.connection.alias)


def uninstall(apps: Any, schema_editor: Any) -> None:
    schema_editor.execute(UNINSTALL_SQL)


class Migration(migrations.Migration):
    dependencies = [("gpufleet_api", "0001_idempotency_keys")]

    operations = [migrations.RunPython(install, uninstall)]
