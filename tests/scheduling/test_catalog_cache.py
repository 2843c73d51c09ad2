"""The per-process catalog cache (scheduling.inputs.load_catalog) and the database-kept token it hangs on
(scheduling.catalog.revision, a scope of gpufleet.api.dataversion): every way of changing a catalog table is
seen by the next load, and a change rolled back never comes back from the cache."""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from scheduling import inputs
from scheduling.catalog import revision as catalog_revision
from scheduling.clusters.models import Cluster, ClusterFlavor
from scheduling.models import Cohort, Flavor, GpuModel, GpuNodePool, PriorityClass


def token() -> int | None:
    return catalog_revision.current(connection)


def capacities() -> dict[str, int]:
    return {f.name: f.capacity for f in inputs.load_catalog()["scheduling"].flavors}


def test_every_way_of_changing_a_catalog_table_draws_a_new_token(fleet) -> None:
    assert catalog_revision.installed(connection), "the migrations install the triggers"
    seen = {token()}
    model = fleet["model"]
    changes = [
        lambda: Flavor.objects.filter(name="h100").update(capacity=20),  # no signal, no save()
        lambda: fleet["whole"].save(),
        lambda: GpuModel.objects.filter(pk=model.pk).update(node_label_value="NVIDIA-H100-NEW"),
        lambda: Cohort.objects.bulk_create([Cohort(name="research")]),
        lambda: Cohort.objects.filter(name="research").delete(),
        lambda: PriorityClass.objects.filter(name__isnull=False).update(description="edited"),
        lambda: GpuNodePool.objects.create(name="h100-pool", flavor=fleet["whole"], gpu_limit=8),
        lambda: ClusterFlavor.objects.create(cluster=Cluster.objects.create(name="train"),
                                             flavor=fleet["mig"], capacity=4),
    ]
    for change in changes:
        change()
        now = token()
        assert now is not None and now not in seen, "each change draws a token never seen before"
        seen.add(now)
    with connection.cursor() as cursor:  # even a raw statement
        cursor.execute("UPDATE scheduling_flavor SET weight = weight WHERE name = %s", ["h100-3g"])
    assert token() not in seen


def test_the_cache_serves_what_the_tables_hold_after_any_change(fleet) -> None:
    assert capacities()["h100"] == 16
    cached = inputs.load_catalog()["scheduling"]
    assert inputs.load_catalog()["scheduling"] is cached, "unchanged tables: the same objects, no rebuild"
    Flavor.objects.filter(name="h100").update(capacity=24)
    assert capacities()["h100"] == 24
    Flavor.objects.filter(name="h100-quarter").delete()
    assert "h100-quarter" not in capacities()


def test_a_rolled_back_change_never_comes_back_from_the_cache(fleet) -> None:
    assert capacities()["h100"] == 16
    with pytest.raises(RuntimeError), transaction.atomic():
        Flavor.objects.filter(name="h100").update(capacity=99)
        assert capacities()["h100"] == 99  # built and cached inside the transaction
        raise RuntimeError("roll back")
    assert capacities()["h100"] == 16
    # A later, different change: its token is new, so the rolled-back catalog cannot be served for it.
    Flavor.objects.filter(name="h100").update(capacity=17)
    assert capacities()["h100"] == 17


def test_clusters_are_read_every_time(fleet) -> None:
    names = [c.name for c in inputs.load_catalog()["clusters"]]
    Cluster.objects.create(name="inference", region="eu-west")
    again = {c.name: c for c in inputs.load_catalog()["clusters"]}
    assert set(again) == {*names, "inference"} and again["inference"].region == "eu-west"


def test_the_settings_the_catalog_carries_are_part_of_its_key(fleet, settings) -> None:
    inputs.load_catalog()
    settings.GPUFLEET_TOPOLOGY_NAME = "other-topology"
    assert inputs.load_catalog()["scheduling"].topology_name == "other-topology"


def test_without_its_triggers_the_catalog_is_never_cached(fleet) -> None:
    with connection.cursor() as cursor:
        cursor.execute('DROP TRIGGER gpufleet_data_changed ON "scheduling_flavor"')
    catalog_revision.forget_checks()
    try:
        assert token() is None
        assert capacities()["h100"] == 16
        Flavor.objects.filter(name="h100").update(capacity=5)  # no trigger now: the token would not move
        assert capacities()["h100"] == 5
    finally:
        catalog_revision.install(connection)
        catalog_revision.forget_checks()
    assert token() is not None

