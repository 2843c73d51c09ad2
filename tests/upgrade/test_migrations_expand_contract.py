"""Issue 16 §3: migrations are expand/contract, because the previous release's pods serve during the hook.

The migrate hook runs while the old web and worker pods still serve (docs/operator-guide.md, "Upgrade").
So a migration may only *expand* the schema: anything the previous release's code still reads or writes
must keep working. This test reads every migration's operations and refuses the destructive ones:

- `RemoveField`, `DeleteModel`, `RenameField`, `RenameModel`, `AlterModelTable`: old code reads them;
- `AddField` of a NOT NULL column without a database default (`db_default`): old code's INSERTs lack it;
- `AlterField` making a nullable column NOT NULL: old code may still write NULL;
- `RunSQL` containing DROP, RENAME, or SET NOT NULL.

A migration that must contract (a release after the code stopped using the column) declares
`contract = True` on its Migration class, with a comment naming that release. Migrations released before
this rule existed are listed in `GRANDFATHERED` (their releases had no running previous version).
"""

from __future__ import annotations

import re

import pytest
from django.db import migrations
from django.db.migrations.loader import MigrationLoader
from django.db.models import NOT_PROVIDED

# Released before the rule; each was applied to empty or demo databases only.
GRANDFATHERED = {
    ("accounts", "0001_initial"), ("audit", "0001_initial"),
    ("tenants", "0001_initial"), ("tenants", "0002_gpu_allocation_policy"), ("tenants", "0003_seed_allocation_policy"),
    ("scheduling", "0001_gpu_catalog"), ("scheduling", "0002_quotas_cohorts_endpoints_node_pools"),
    ("scheduling", "0003_seed_priority_classes_and_sla_tiers"), ("scheduling", "0004_sync_runs"),
    ("billing", "0001_usage_prices_invoices"), ("billing", "0002_finalized_invoice_guard"),
    ("billing", "0003_usage_without_redundant_fk_indexes"),
}
OURS = {"accounts", "audit", "tenants", "scheduling", "billing", "outbox", "gpufleet_api"}
DESTRUCTIVE_SQL = re.compile(r"\b(DROP|RENAME)\b|SET\s+NOT\s+NULL", re.IGNORECASE)


def destructive(loader: MigrationLoader, key: tuple[str, str], migration: migrations.Migration) -> list[str]:
    problems = []
    state = loader.project_state(key, at_end=False)
    for op in migration.operations:
        name = type(op).__name__
        if isinstance(op, migrations.RemoveField | migrations.DeleteModel | migrations.RenameField
                      | migrations.RenameModel | migrations.AlterModelTable):
            problems.append(f"{name} {op.describe()}")
        elif isinstance(op, migrations.AddField):
            field = op.field
            if not field.null and not field.many_to_many and field.db_default is NOT_PROVIDED:
                problems.append(f"{name} {op.describe()}: NOT NULL without db_default (old code inserts fail)")
        elif isinstance(op, migrations.AlterField):
            old = state.models[key[0], op.model_name_lower].fields[op.name]
            if old.null and not op.field.null:
                problems.append(f"{name} {op.describe()}: makes a nullable column NOT NULL")
        elif isinstance(op, migrations.RunSQL):
            sql = op.sql if isinstance(op.sql, str) else " ".join(map(str, op.sql))
            if DESTRUCTIVE_SQL.search(sql):
                problems.append(f"RunSQL with {DESTRUCTIVE_SQL.search(sql).group(0)}")  # type: ignore[union-attr]
        state = state.clone()
        op.state_forwards(key[0], state)
    return problems


def loader() -> MigrationLoader:
    return MigrationLoader(None, ignore_no_migrations=True)


def ours(loaded: MigrationLoader) -> list[tuple[tuple[str, str], migrations.Migration]]:
    return sorted((key, m) for key, m in loaded.disk_migrations.items() if key[0] in OURS)


def test_every_new_migration_only_expands_the_schema() -> None:
    loaded = loader()
    found = {
        key: problems
        for key, migration in ours(loaded)
        if key not in GRANDFATHERED and not getattr(migration, "contract", False)
        and (problems := destructive(loaded, key, migration))
    }
    assert found == {}, "destructive migrations without `contract = True` (see the module docstring)"


def test_the_grandfathered_list_names_real_migrations() -> None:
    """A typo would silently exempt nothing; a removed migration would leave a stale exemption."""
    assert GRANDFATHERED <= set(loader().disk_migrations)


@pytest.mark.parametrize(
    ("operation", "expected"),
    [
        (migrations.RemoveField("syncrun", "errors"), "RemoveField"),
        (migrations.RenameField("syncrun", "errors", "problems"), "RenameField"),
        (migrations.DeleteModel("syncrun"), "DeleteModel"),
        (migrations.RunSQL("ALTER TABLE scheduling_syncrun DROP COLUMN errors"), "DROP"),
        (migrations.RunSQL("ALTER TABLE t ALTER COLUMN c SET NOT NULL"), "SET NOT NULL"),
    ],
)
def test_the_rule_catches_each_destructive_operation(operation, expected: str) -> None:
    """The linter itself: a synthetic migration on top of the latest scheduling one is refused."""
    loaded = loader()
    latest = max(key for key in loaded.disk_migrations if key[0] == "scheduling")
    migration = migrations.Migration("9999_synthetic", "scheduling")
    migration.operations = [operation]
    loaded.graph.add_node(("scheduling", "9999_synthetic"), migration)
    loaded.graph.add_dependency(migration, ("scheduling", "9999_synthetic"), latest)
    problems = destructive(loaded, ("scheduling", "9999_synthetic"), migration)
    assert problems and expected in problems[0]


def test_a_not_null_column_needs_a_database_default() -> None:
    from django.db import models

    loaded = loader()
    latest = max(key for key in loaded.disk_migrations if key[0] == "scheduling")
    key = ("scheduling", "9999_synthetic")
    migration = migrations.Migration(key[1], key[0])
    loaded.graph.add_node(key, migration)
    loaded.graph.add_dependency(migration, key, latest)
    migration.operations = [migrations.AddField("syncrun", "note", models.TextField(default=""))]
    assert "NOT NULL without db_default" in destructive(loaded, key, migration)[0]
    migration.operations = [migrations.AddField("syncrun", "note", models.TextField(db_default=""))]
    assert destructive(loaded, key, migration) == []
    migration.operations = [migrations.AddField("syncrun", "note", models.TextField(null=True))]
    assert destructive(loaded, key, migration) == []
