"""One data-version mechanism for every cache (gpufleet/api/dataversion.py, docs/adr/0004).

The change trigger also redraws the tokens of the scopes named by its arguments (the GPU catalog's:
scheduling 0012), kept in `gpufleet_data_token`; and every table migrated so far gets the trigger here -- a
migration, not a post_migrate hook: this one depends on every app's latest migration when it was written,
and a later migration that creates a table adds `dataversion.watch_new_tables()`. Expand only: the previous
release's pods keep reading `gpufleet_data_version` as before."""

from typing import Any

from django.db import migrations

FORWARD_SQL = """
CREATE TABLE IF NOT EXISTS gpufleet_data_token (
    name text PRIMARY KEY,
    token bigint NOT NULL
);

CREATE OR REPLACE FUNCTION gpufleet_data_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO gpufleet_data_change DEFAULT VALUES;
    -- The scopes named by the trigger's arguments: a new token now, inside this statement's transaction.
    FOR i IN 0 .. TG_NARGS - 1 LOOP
        INSERT INTO gpufleet_data_token (name, token) VALUES (TG_ARGV[i], floor(random() * 9.0e18)::bigint)
            ON CONFLICT (name) DO UPDATE SET token = EXCLUDED.token;
    END LOOP;
    RETURN NULL;
END $$;
"""

BACKWARD_SQL = """
CREATE OR REPLACE FUNCTION gpufleet_data_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO gpufleet_data_change DEFAULT VALUES;
    RETURN NULL;
END $$;
DROP TABLE IF EXISTS gpufleet_data_token;
"""


def watch_every_table(apps: Any, schema_editor: Any) -> None:
    from gpufleet.api import dataversion

    dataversion.install_triggers(schema_editor.connection.alias)


class Migration(migrations.Migration):
    # Every app's latest migration when this was written: the tables they create are watched from here on.
    dependencies = [
        ("gpufleet_api", "0002_data_version"),
        ("accounts", "0001_initial"),
        ("admin", "0003_logentry_add_action_flag_choices"),
        ("audit", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("billing", "0004_clusters"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("fleetops", "0001_fleet_settings_and_notices"),
        ("nodehealth", "0001_initial"),
        ("outbox", "0001_initial"),
        ("scheduling", "0011_endpoint_gated"),
        ("sessions", "0001_initial"),
        ("tenants", "0003_seed_allocation_policy"),
    ]

    operations = [
        migrations.RunSQL(FORWARD_SQL, BACKWARD_SQL),
        migrations.RunPython(watch_every_table, migrations.RunPython.noop),
    ]
