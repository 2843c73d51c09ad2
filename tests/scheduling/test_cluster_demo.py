"""The demo fleet spans three host clusters besides `default` (training, inference, an untrusted-only dev
cluster) with placements that honour trust; seeding twice changes nothing."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from scheduling.clusters.models import Cluster, ClusterFlavor, Placement, PlacementChangeRequest
from scheduling.models import Quota

pytestmark = pytest.mark.django_db


def test_demo_has_three_clusters_with_placements(eager_tasks) -> None:
    call_command("demo", stdout=StringIO())
    state = (sorted(Cluster.objects.values_list("name", "purpose", "trust_levels")),
             sorted(Placement.objects.values_list("tenant__slug", "cluster__name", "home")),
             ClusterFlavor.objects.count(), PlacementChangeRequest.objects.count())
    call_command("demo", stdout=StringIO())
    assert state == (sorted(Cluster.objects.values_list("name", "purpose", "trust_levels")),
                     sorted(Placement.objects.values_list("tenant__slug", "cluster__name", "home")),
                     ClusterFlavor.objects.count(), PlacementChangeRequest.objects.count())
    clusters, placements, _, _ = state
    assert clusters == [("default", "general", []), ("dev", "dev", ["untrusted"]),
                        ("inference", "inference", []), ("training", "training", [])]
    by_tenant: dict[str, set[str]] = {}
    for slug, cluster, _home in placements:
        by_tenant.setdefault(slug, set()).add(cluster)
    assert by_tenant["contractors"] == {"default", "dev"}
    assert by_tenant["vision"] == {"default", "training"}
    assert by_tenant["nlp-inference"] == {"default", "inference"}
    quotas = set(Quota.objects.exclude(cluster__name="default").values_list("tenant__slug", "cluster__name",
                                                                            "flavor__name", "nominal"))
    assert quotas == {("vision", "training", "a100-whole", 8), ("vision", "training", "a100-3g", 6),
                      ("nlp-inference", "inference", "a100-whole", 4), ("contractors", "dev", "a100-whole", 2)}
    # Only untrusted tenants are on dev.
    assert {slug for slug, cluster, _ in placements if cluster == "dev"} == {"contractors"}


def test_demo_has_a_pool_for_every_flavor_hami_included(eager_tasks) -> None:
    """Issue 26 B5: the demo sells HAMi quarter shares, so a pool must create nodes HAMi's device plugin runs on."""
    from scheduling.inputs import load_catalog
    from scheduling.models import GpuNodePool
    from scheduling.nodepools.render import HAMI_NODE_SELECTOR, pool_labels

    call_command("demo", stdout=StringIO())
    pools = dict(GpuNodePool.objects.filter(cluster__name="default").values_list("name", "flavor__mode"))
    assert pools == {"a100-pool": "whole", "a100-mig-pool": "mig", "a100-hami-pool": "hami"}
    cat = load_catalog()["scheduling"]
    hami = next(p for p in cat.node_pools if p.name == "a100-hami-pool")
    assert HAMI_NODE_SELECTOR.items() <= pool_labels(hami, cat).items()


@pytest.mark.parametrize("tool", ["flux", "argocd"])
def test_the_demo_fleet_can_be_delivered_each_tree_to_its_own_cluster(eager_tasks, tool: str) -> None:
    """Issue 26 B7: `render --sync` refuses a fleet whose clusters it cannot tell apart; the demo's is not one."""
    call_command("demo", stdout=StringIO())
    out = StringIO()
    call_command("render", sync=tool, repo_url="https://git.example.com/fleet.git", stdout=out)
    for cluster in ("dev", "inference", "training"):  # Flux: the kubeConfig Secret; Argo CD: the cluster's name
        expected = f"gpufleet-cluster-{cluster}" if tool == "flux" else f"destination:\n        name: {cluster}"
        assert expected in out.getvalue()


def test_every_gpu_flavor_on_every_demo_cluster_has_a_pool_there(eager_tasks) -> None:
    """Issue 26, F5: training, inference and dev offered GPU flavors with no NodePool (the demo seeded pools on
    `default` only), so Kueue admitted work no node would ever run. The doctor's check passes on the demo now."""
    from scheduling.doctor_clusters import check_flavor_pools
    from scheduling.inputs import load_catalog
    from scheduling.models import GpuNodePool

    call_command("demo", stdout=StringIO())
    pools = set(GpuNodePool.objects.values_list("cluster__name", "flavor__name", "flavor__mode", "gpu_limit"))
    call_command("demo", stdout=StringIO())
    assert pools == set(GpuNodePool.objects.values_list("cluster__name", "flavor__name", "flavor__mode", "gpu_limit"))
    offered = set(ClusterFlavor.objects.values_list("cluster__name", "flavor__name"))
    assert {("training", "a100-whole"), ("training", "a100-3g"), ("inference", "a100-hami-25"),
            ("dev", "a100-whole")} <= offered
    assert offered <= {(cluster, flavor) for cluster, flavor, _, _ in pools}
    # Whole nodes of 8 GPUs: 16 whole, 14 x 3g (2 a GPU -> 7 GPUs), 16 quarter shares (4 GPUs), 8 and 4 whole.
    assert {(c, f, limit) for c, f, _, limit in pools if c != "default"} == {
        ("training", "a100-whole", 16), ("training", "a100-3g", 8), ("inference", "a100-whole", 8),
        ("inference", "a100-hami-25", 8), ("dev", "a100-whole", 8)}
    clusters = load_catalog()["clusters"]
    assert {spec.name for spec in clusters} == {"default", "training", "inference", "dev"}
    for spec in clusters:
        findings = check_flavor_pools(spec, None)
        assert findings and all(f.ok for f in findings), [f.detail for f in findings if not f.ok]


@pytest.mark.parametrize("store, gated", [("http://127.0.0.1:8200", {"support-chat", "summarizer"}), ("", set())])
def test_the_demos_gated_models_wait_for_the_token_when_a_store_exists(eager_tasks, settings, store, gated) -> None:
    """Review N5: Meta's and Mistral's models are gated on Hugging Face. With the demo's OpenBao they are marked
    gated (their pods wait for the tenant's token); without a store they could not be created gated at all."""
    from scheduling.models import InferenceEndpoint

    settings.GPUFLEET_OPENBAO_ADDR = store
    call_command("demo", stdout=StringIO())
    assert set(InferenceEndpoint.objects.filter(gated=True).values_list("name", flat=True)) == gated
    assert InferenceEndpoint.objects.count() == 3
