"""MultiKueue mode through the per-cluster render, with the three-cluster fleet: off (the default) renders
nothing new; on, the home cluster of a tenant with another placement gets the dispatch objects, each worker
the mirrored LocalQueue, every tree validates against the upstream CRDs, and no kubeconfig is inlined."""

from __future__ import annotations

import pytest

from infra.manifests import to_yaml_stream
from scheduling.clusters import multikueue
from tenants.backends import get_schema_registry
from tenants.reconcile import tenant_view
from tenants.render import RenderContext, render_placed
from tests.support.services import need_reference

pytestmark = pytest.mark.django_db

KINDS = {"AdmissionCheck", "MultiKueueConfig", "MultiKueueCluster"}
ADDED = {("LocalQueue", "gpu-dispatch"), ("ClusterQueue", "tenant-acme-dispatch"),
         ("AdmissionCheck", "tenant-acme-multikueue"), ("MultiKueueConfig", "tenant-acme"),
         ("MultiKueueCluster", "tenant-acme-inference")}


def trees(tenant) -> dict[str, list[dict]]:
    return {p.cluster: ms for p, ms in render_placed(tenant_view(tenant), RenderContext.from_settings())}


def test_off_by_default_changes_nothing(placed, settings) -> None:
    settings.GPUFLEET_MULTIKUEUE = False
    before = {c: to_yaml_stream(ms) for c, ms in trees(placed["acme"]).items()}
    assert not any(m["kind"] in KINDS for ms in trees(placed["acme"]).values() for m in ms)
    settings.GPUFLEET_MULTIKUEUE = True
    after = trees(placed["acme"])
    # The tenant's existing objects are byte-identical; only MultiKueue objects were added.
    assert {(m["kind"], m["metadata"]["name"]) for ms in after.values() for m in ms} >= ADDED
    for cluster, stream in before.items():
        kept = [m for m in after[cluster] if (m["kind"], m["metadata"]["name"]) not in ADDED]
        assert to_yaml_stream(kept) == stream


def test_on_home_dispatches_to_its_placements_and_everything_validates(placed, settings) -> None:
    need_reference()
    settings.GPUFLEET_MULTIKUEUE = True
    by_cluster = trees(placed["acme"])
    assert set(by_cluster) == {"training", "inference"}  # home training, placement inference
    home, worker = by_cluster["training"], by_cluster["inference"]
    registry = get_schema_registry()
    assert registry.validate(home) == [] and registry.validate(worker) == []
    assert multikueue.check(home) == []
    config = next(m for m in home if m["kind"] == "MultiKueueConfig")
    assert config["spec"]["clusters"] == ["tenant-acme-inference"]
    mkc = next(m for m in home if m["kind"] == "MultiKueueCluster")
    assert mkc["spec"]["clusterSource"] == {"kubeConfig": {"locationType": "Secret",
                                                           "location": "multikueue-inference"}}
    dispatch = next(m for m in home if m["kind"] == "ClusterQueue" and m["metadata"]["name"].endswith("-dispatch"))
    assert dispatch["spec"]["admissionChecksStrategy"]["admissionChecks"] == [{"name": "tenant-acme-multikueue"}]
    assert not any(m["kind"] in KINDS for m in worker)
    local = [m for m in worker if m["kind"] == "LocalQueue" and m["metadata"]["name"] == "gpu-dispatch"]
    assert local and local[0]["spec"] == {"clusterQueue": "tenant-acme"}
    assert "kind: Config" not in to_yaml_stream(home)


def test_a_tenant_on_one_cluster_gets_no_dispatch(placed, settings) -> None:
    settings.GPUFLEET_MULTIKUEUE = True
    (only,) = trees(placed["sandbox"]).values()
    assert not any(m["kind"] in KINDS or m["metadata"]["name"] == "gpu-dispatch" for m in only)
