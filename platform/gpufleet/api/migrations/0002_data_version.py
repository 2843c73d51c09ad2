"""The fleet's data version and the triggers that keep it (gpufleet/api/dataversion.py)."""

from typing import Any

from django.db import migrations


def install(apps: Any, schema_editor: Any) -> None:
    from gpufleet.api import dataversion

    schema_editor.execute(dataversion.INSTALL_SQL)
    # Tables migrated before this one; later ones get theirs from post_migrate (apps.py).
    dataversion.install_triggers(schema_editor.connection.alias)


def uninstall(apps: Any, schema_editor: Any) -> None:
    from gpufleet.api import dataversion

    schema_editor.execute(dataversion.UNINSTALL_SQL)


class Migration(migrations.Migration):
    dependencies = [("gpufleet_api", "0001_idempotency_keys")]

    operations = [migrations.RunPython(install, uninstall)]
