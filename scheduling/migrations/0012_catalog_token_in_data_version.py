"""The catalog's token becomes a scope of the platform's data versions (gpufleet.api.dataversion,
docs/adr/0004): the catalog's tables carry the one data-change trigger with the argument `catalog`.

Expand only (tests/upgrade/test_migrations_expand_contract.py): the previous release's pods, serving while
this runs, still read `scheduling_catalogrevision`, which their triggers (`gpufleet_catalog_changed`, where
0009 installed them) keep writing; both stay until a later release's contract migration drops them. The
model leaves the project's state only."""

from typing import Any

from django.db import migrations


def forwards(apps: Any, schema_editor: Any) -> None:
    from scheduling.catalog import revision as catalog_revision

    catalog_revision.install(schema_editor.connection)


def backwards(apps: Any, schema_editor: Any) -> None:
    from gpufleet.api import dataversion
    from scheduling.catalog import revision as catalog_revision

    connection = schema_editor.connection
    dataversion.watch_scope(connection, catalog_revision.TABLES, None)  # plain data-version triggers again
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {dataversion.TOKEN_TABLE} WHERE name = %s", [catalog_revision.SCOPE])


class Migration(migrations.Migration):
    dependencies = [
        ("scheduling", "0011_endpoint_gated"),
        ("gpufleet_api", "0003_one_data_version"),
    ]

    operations = [
        migrations.RunPython(forwards, backwards),
        migrations.SeparateDatabaseAndState(state_operations=[migrations.DeleteModel(name="CatalogRevision")]),
    ]
