"""Every placement is usable with the tenant's own kubectl (issue 26): a vCluster runs on each of the tenant's
clusters, the kubeconfig has one context per placement whose server is that vCluster's routed and certified
name, and a GPU pod created through that context goes the whole journey on that cluster -- synced into the
cluster's tenant namespace, routed to its LocalQueue `gpu`, admitted by Kueue against the tenant's quota on
that cluster in a flavor offered there, and bound by the scheduler.

The journey is tests/journey's model of the host path (vCluster v0.36.1 pod syncer, Kyverno, Kueue v0.19.2,
KAI, Pod Security, ResourceQuota, scheduler), run against each cluster's own rendered tree."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
import yaml

from tenants.backends import get_schema_registry
from tenants.isolation.kubeconfig import context_name, kubeconfig_yaml
from tenants.reconcile import tenant_view
from tenants.render import RenderContext, platform_targets, render_placed, render_platform
from tests.journey import runner, workloads
from tests.journey.fleet import PATCHED_SYNCER, Fleet
from tests.support.services import need_reference

pytestmark = pytest.mark.django_db

# Each tenant's placements (tests/clusters/conftest.py `placed`): cluster -> the GPU flavor offered there.
PLACEMENTS = {"acme": {"training": "h100", "inference": "l4"}, "sandbox": {"dev": "l4"}}


@pytest.fixture
def journeys(placed, settings):  # type: ignore[no-untyped-def]
    settings.GPUFLEET_VCLUSTER_OIDC_ISSUER = "https://login.gpufleet.test"
    settings.GPUFLEET_VCLUSTER_URL_TEMPLATE = "https://{slug}.vcluster.gpufleet.test"
    # Topology-aware placement is issue 26's B1 (a helper of its own); the journey model has no TAS.
    settings.GPUFLEET_TOPOLOGY_LEVELS = []
    # The stock v0.36.1 syncer strips Kueue's gate (issue 26 B3, a helper of its own): the journeys run the
    # syncer with the fix, as tests/journey does.
    settings.GPUFLEET_VCLUSTER_SYNCER_IMAGE = PATCHED_SYNCER
    ctx = RenderContext.from_settings()
    platform = {t.cluster: render_platform(t.ctx) for t in platform_targets(ctx)}
    fleets: dict[tuple[str, str], Fleet] = {}
    for slug, tenant in placed.items():
        for place, manifests in render_placed(tenant_view(tenant), ctx):
            if not place.refused:
                fleets[(slug, place.cluster)] = Fleet(platform=platform[place.cluster], tenants={slug: manifests})
    return placed, fleets


@pytest.mark.parametrize(("slug", "cluster"), [(s, c) for s, cs in PLACEMENTS.items() for c in cs])
def test_a_gpu_pod_from_each_placements_context_runs_there(journeys, slug: str, cluster: str) -> None:
    tenants, fleets = journeys
    assert set(fleets) == {(s, c) for s, cs in PLACEMENTS.items() for c in cs}
    fleet = fleets[(slug, cluster)]
    namespace = f"tenant-{slug}"

    # kubectl --context <this placement>: the server is this cluster's vCluster, routed and certified.
    config = yaml.safe_load(kubeconfig_yaml(tenants[slug]))
    home = next(c for c, _ in PLACEMENTS[slug].items() if tenants[slug].placements.get(cluster__name=c).home)
    name = context_name(slug, "" if cluster == home else cluster)
    context = next(c["context"] for c in config["contexts"] if c["name"] == name)
    server = next(c["cluster"]["server"] for c in config["clusters"] if c["name"] == context["cluster"])
    values = fleet.vcluster_values(namespace)
    host = urlsplit(server).hostname
    assert values["controlPlane"]["ingress"] == {"enabled": True, "host": host}
    assert host in values["controlPlane"]["proxy"]["extraSANs"]

    journey = runner.run(workloads.inference_pod("whole"), namespace, fleet)
    assert journey.ok, "\n".join(f"{name}: {r.ok} {r.reason}" for name, r in journey.trace)
    admitted = journey.step("kueue-admission").facts
    assert admitted["admitted"] and admitted["cluster_queue"] == namespace
    assert admitted["flavors"]["nvidia.com/gpu"] == PLACEMENTS[slug][cluster]
    assert journey.step("scheduler").ok


def test_one_context_per_placement_and_distinct_api_names(journeys) -> None:
    tenants, fleets = journeys
    config = yaml.safe_load(kubeconfig_yaml(tenants["acme"]))
    assert [c["name"] for c in config["contexts"]] == ["gpufleet-acme", "gpufleet-acme@inference"]
    assert config["current-context"] == "gpufleet-acme"  # the home (training)
    servers = {c["name"]: c["cluster"]["server"] for c in config["clusters"]}
    assert servers == {"gpufleet-acme": "https://acme.vcluster.gpufleet.test",
                       "gpufleet-acme@inference": "https://acme-inference.vcluster.gpufleet.test"}
    assert [c["name"] for c in yaml.safe_load(kubeconfig_yaml(tenants["sandbox"]))["contexts"]] == ["gpufleet-sandbox"]
    need_reference()
    registry = get_schema_registry()
    for fleet in fleets.values():
        assert registry.validate(fleet.manifests) == []
