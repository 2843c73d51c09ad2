"""Issue 9 upgrade path: migration scheduling 0008 turns a single-cluster installation into cluster `default`.

Rows written before the migration (by the previous release's schema) end up on `default`: node pools, quotas and
quota requests point at it, every flavor is offered there with its whole capacity, every tenant has its home
placement there. Runs the real migrations backwards and forwards on the test database.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("scheduling", "0007_sync_run_repository"), ("tenants", "0003_seed_allocation_policy")]
AFTER = [("scheduling", "0008_clusters_and_placements")]


def _migrate(targets):  # type: ignore[no-untyped-def]
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.mark.django_db(transaction=True)
def test_existing_rows_move_to_the_default_cluster() -> None:
    old = _migrate(BEFORE)
    try:
        Tenant = old.get_model("tenants", "Tenant")
        a = Tenant.objects.create(slug="acme", display_name="Acme", trust_level="standard", phase="ready")
        b = Tenant.objects.create(slug="beta", display_name="Beta", trust_level="untrusted", phase="ready")
        model = old.get_model("scheduling", "GpuModel").objects.create(name="h100", dcgm_model_name="H100",
                                                                       memory_mib=81559)
        Flavor = old.get_model("scheduling", "Flavor")
        whole = Flavor.objects.create(name="h100", gpu_model=model, mode="whole", capacity=16)
        mig = Flavor.objects.create(name="h100-3g", gpu_model=model, mode="mig", mig_profile="3g.40gb", capacity=7)
        old.get_model("scheduling", "GpuNodePool").objects.create(name="pool", flavor=whole, gpu_limit=8)
        old.get_model("scheduling", "Quota").objects.create(tenant=a, flavor=whole, nominal=4)
        old.get_model("scheduling", "Quota").objects.create(tenant=b, flavor=mig, nominal=2)
        old.get_model("scheduling", "QuotaChangeRequest").objects.create(tenant=a, flavor=mig, nominal=3)

        new = _migrate(AFTER)
        Cluster = new.get_model("scheduling", "Cluster")
        default = Cluster.objects.get()
        assert (default.name, default.purpose, default.pk) == ("default", "general", 1)
        for name in ("GpuNodePool", "Quota", "QuotaChangeRequest"):
            rows = new.get_model("scheduling", name).objects.all()
            assert rows and {r.cluster_id for r in rows} == {default.pk}, name
        offers = new.get_model("scheduling", "ClusterFlavor").objects.filter(cluster=default)
        assert {(o.flavor.name, o.capacity) for o in offers} == {("h100", 16), ("h100-3g", 7)}
        placements = new.get_model("scheduling", "Placement").objects.all()
        assert {(p.tenant.slug, p.cluster_id, p.home) for p in placements} == {
            ("acme", default.pk, True), ("beta", default.pk, True)}
        # The previous release's code inserts without the new columns: the database default is `default`.
        with connection.cursor() as cursor:
            cursor.execute("INSERT INTO scheduling_quota (tenant_id, flavor_id, nominal, updated) "
                           "VALUES (%s, %s, 1, now()) RETURNING cluster_id", [b.pk, whole.pk])
            assert cursor.fetchone()[0] == default.pk
    finally:
        _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
