"""Karpenter NodePools for the GPU flavors, and which flavors may use topology-aware scheduling. Pure.

Why the pool must carry the flavor's labels (Karpenter v1.14.1, kubernetes-sigs/karpenter):
- `pkg/scheduling/requirements.go` (`Requirements.Compatible`): a pod's nodeSelector/affinity on a
  *custom* label (any key outside `WellKnownLabels`, e.g. `nvidia.com/gpu.product` from the Kueue
  ResourceFlavor) must be defined by the NodePool's template labels or requirements, otherwise the pool
  is skipped with "label ... does not have known values". Well-known labels (zone, region, instance
  type, arch, os, capacity type, nodepool) may stay undefined.
- `pkg/apis/v1/labels.go`: `RestrictedLabelDomains` is `karpenter.sh` only and `RestrictedLabels` is
  `kubernetes.io/hostname`; any other key (`nvidia.com/...`, `gpufleet.io/...`) may be a template label.
- Template labels do not constrain which instance type the cloud provider launches; only requirements
  on instance-type keys do. So every pool gets a GPU-model requirement (`node.kubernetes.io/instance-type`
  from the pool's instance types and, on AWS, `karpenter.k8s.aws/instance-gpu-name`).

Topology: the levels (GPUFLEET_TOPOLOGY_LEVELS, none by default) label each pool's nodes as one domain and feed
KAI's Topology. Kueue's topology-aware scheduling is never used: `kueue_tas_refusal` says why (issue 26, B1).
"""

from __future__ import annotations

from typing import Any

from gpufleet.core import sharing
from infra.manifests import Manifest
from scheduling.catalog import rules as catalog
from scheduling.inputs import Catalog, FlavorSpec, NodePoolSpec, QuotaSpec
from tenants.isolation.policy import GPU_FLAVOR_LABEL, GPU_MODE_LABEL, GPU_TAINT_KEY
from tenants.render import platform_metadata

KARPENTER = "karpenter.sh/v1"
KARPENTER_ALPHA = "karpenter.sh/v1alpha1"
GPU_TAINT = {"key": GPU_TAINT_KEY, "value": "true", "effect": "NoSchedule"}
PRODUCT_LABEL = "nvidia.com/gpu.product"
MIG_CONFIG_LABEL = "nvidia.com/mig.config"  # read by the GPU operator's mig-manager (mig-parted configs)
POOL_LABEL = "gpufleet.io/node-pool"
FLAVOR_LABEL = GPU_FLAVOR_LABEL  # refused to pods without a GPU (tenants.isolation.nodes)
MODE_LABEL = GPU_MODE_LABEL
GPUS_PER_NODE = "gpufleet.io/gpus-per-node"
DEDICATED_LABEL = "gpufleet.io/dedicated-tenant"  # same key as tenants.isolation.policy.DEDICATED_POOL_LABEL
AWS_NODE_CLASS_GROUP = "karpenter.k8s.aws"
AWS_GPU_NAME = "karpenter.k8s.aws/instance-gpu-name"  # karpenter-provider-aws pkg/apis/v1/labels.go
# Per-GPU memory in MiB (karpenter-provider-aws@v1.14.1:pkg/apis/v1/labels.go:163, value from EC2's
# GpuInfo.Gpus[0].MemoryInfo.SizeInMiB, pkg/providers/instancetype/types.go:276). The GPU name alone is the
# family: p4d.24xlarge and p4de.24xlarge are both `a100`, with 40960 and 81920 MiB
# (website/content/en/docs/reference/instance-types.md:25174,25210 @v1.14.1).
AWS_GPU_MEMORY = "karpenter.k8s.aws/instance-gpu-memory"
# Labels every node has without the pool setting them: the kubelet's hostname, and the offering's
# zone/region that Karpenter writes (labels.go WellKnownLabelsForOfferings).
AUTOMATIC_LABELS = frozenset({"kubernetes.io/hostname", "topology.kubernetes.io/zone",
                              "topology.kubernetes.io/region"})
# Cloud-provider node labels present on every node of that provider (EKS network topology labels).
PROVIDER_LABELS = {AWS_NODE_CLASS_GROUP: ("topology.k8s.aws/network-node-layer-",)}


def flavor_node_labels(flavor: FlavorSpec) -> dict[str, str]:
    """The labels Kueue turns into the pod's nodeSelector for this flavor (ResourceFlavor.nodeLabels)."""
    labels = dict(flavor.node_labels)
    if flavor.product_label:
        labels.setdefault(PRODUCT_LABEL, flavor.product_label)
    # One GPU model's nodes come in three shapes (whole, MIG-partitioned, HAMi): the mode label keeps a
    # whole-GPU pod off a MIG node (no nvidia.com/gpu under the mixed strategy) and off HAMi's nodes. It is
    # also what keeps Kueue from admitting a pod on another mode's flavor of the same resource group: the
    # tenant's routing policy gives every GPU pod this key with its own mode (scheduling.routing.
    # gpu_mode_rules) and Kueue skips flavors whose label differs (issue 26, F3). Always the flavor's mode,
    # never a value from the flavor's own labels (create_flavor refuses one), so pods, flavors and pools agree.
    labels[MODE_LABEL] = flavor.mode
    return dict(sorted(labels.items()))


def provided_by_node(label: str, cat: Catalog) -> bool:
    """Whether every node carries `label` without the NodePool setting it."""
    if label in AUTOMATIC_LABELS:
        return True
    return any(label.startswith(prefix) for prefix in PROVIDER_LABELS.get(cat.node_class_group, ()))


def topology_labels(pool_name: str, cat: Catalog) -> dict[str, str]:
    """Template labels for the topology levels no one else sets. Karpenter cannot know a node's rack,
    so a pool is one topology domain at those levels: the operator backs that with the pool's node
    class (a cluster placement group / capacity block), see docs/scheduling.md."""
    return {level: pool_name for level in cat.topology_levels if not provided_by_node(level, cat)}


def pools_of(flavor: FlavorSpec, cat: Catalog) -> list[NodePoolSpec]:
    return [p for p in cat.node_pools if p.flavor.name == flavor.name]


# The resource flavor every ClusterQueue holds for cpu/memory (scheduling.render.HOST_FLAVOR), never TAS.
HOST_FLAVOR = "gpufleet-host"


def kueue_tas_refusal(flavor: FlavorSpec, cat: Catalog) -> str:
    """Why this flavor's Kueue ResourceFlavor carries no `topologyName` (issue 26, B1). Kueue v0.19.2
    (kubernetes-sigs/kueue@v0.19.2):
    - a pod without a topology request is refused by a TAS flavor unless its ClusterQueue is TAS-only, i.e.
      every flavor of every resource group has a topologyName (tas_flavorassigner.go:198-200,
      pkg/cache/scheduler/clusterqueue.go:741-750); ours also hold `gpufleet-host` for cpu/memory;
    - a pod with a topology request is refused by `gpufleet-host`, which covers the cpu/memory it requests
      (tas_flavorassigner.go:175-182), and a TAS `gpufleet-host` would make two TAS flavors for one pod
      set ("more than one TAS flavor assigned", tas_flavorassigner.go:143-164);
    - TAS places pods on nodes that exist, except behind ProvisioningRequest/MultiKueue
      (tas_flavorassigner.go:104-108), and a gated pod never becomes PodScheduled=Unschedulable, the only
      pods Karpenter provisions for -- so a flavor whose pool scales from zero would never get a node.
    So the platform renders no topologyName at all; the topology levels serve KAI and the pools' labels."""
    reasons = [f"its ClusterQueues also hold the non-TAS {HOST_FLAVOR} flavor for cpu/memory"]
    if flavor.mode == catalog.HAMI:
        reasons.append("HAMi shares are not node allocatable")
    if pools_of(flavor, cat):
        reasons.append("its nodes come from Karpenter, which never provisions for a gated pod")
    return "; ".join(reasons)


def gpu_family(flavor: FlavorSpec) -> str:
    """AWS's instance-gpu-name for the flavor's model: the model name's first part (`h100-80gb` ->
    `h100`), the convention docs/scheduling.md asks GPU model names to follow."""
    return flavor.gpu_model.split("-", 1)[0].lower()


def requirements(pool: NodePoolSpec, cat: Catalog) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": pool.capacity_types or ["on-demand"]},
    ]
    if pool.instance_types:
        out.append({"key": "node.kubernetes.io/instance-type", "operator": "In",
                    "values": sorted(pool.instance_types)})
    if cat.node_class_group == AWS_NODE_CLASS_GROUP:
        out.append({"key": AWS_GPU_NAME, "operator": "In", "values": [gpu_family(pool.flavor)]})
        if pool.flavor.gpu_memory_mib:
            # The exact model: without it an `a100-80gb` pool may launch 40 GB A100s (p4d).
            out.append({"key": AWS_GPU_MEMORY, "operator": "In", "values": [str(pool.flavor.gpu_memory_mib)]})
    return out


# A HAMi pool's node labels (the registry's: the mode label, HAMi's `gpu: "on"`, the GPU operator's device
# plugin switched off). Where HAMi's device plugin runs (prerequisites: the HAMi release's
# devicePlugin.nvidiaNodeSelector): the chart's default key `gpu: "on"` (Helm keeps it under ours) and our mode
# label. Only HAMi pools' nodes carry both.
HAMI_NODE_LABELS = sharing.HAMI.node_labels
HAMI_NODE_SELECTOR = {key: HAMI_NODE_LABELS[key] for key in ("gpu", MODE_LABEL)}


def pool_labels(pool: NodePoolSpec, cat: Catalog) -> dict[str, str]:
    flavor = pool.flavor
    labels = {**topology_labels(pool.name, cat), **flavor_node_labels(flavor),
              POOL_LABEL: pool.name, FLAVOR_LABEL: flavor.name, MODE_LABEL: flavor.mode}
    if flavor.mode == catalog.MIG and flavor.mig_profile:
        labels[MIG_CONFIG_LABEL] = f"all-{flavor.mig_profile}"
    labels.update(sharing.get(flavor.mode).node_labels)
    return dict(sorted(labels.items()))


def hami_device_plugin_tolerations(cat: Catalog) -> list[dict[str, Any]]:
    """Every taint a HAMi pool puts on its nodes, tolerated by key (Exists): the GPU taint, a trust-level
    reservation, a dedicated tenant's, and the HAMi flavors' own taints (pool_taints)."""
    keys = {GPU_TAINT["key"], TRUST_TAINT_KEY, DEDICATED_LABEL}
    keys |= {t["key"] for f in cat.flavors if f.mode == catalog.HAMI for t in f.taints if t.get("key")}
    return [{"key": key, "operator": "Exists"} for key in sorted(keys)]  # any effect


# A pool reserved for some tenant trust levels (GpuNodePool.trust_levels) taints its nodes with this key and the
# levels as the value; only pods synced by a vCluster of an admitted tenant carry the toleration
# (reserved_pool_tolerations, added to every synced pod by the vCluster syncer: tenants cannot remove it).
TRUST_TAINT_KEY = "gpufleet.io/trust-levels"


def trust_taint(pool: NodePoolSpec) -> dict[str, Any] | None:
    if not pool.trust_levels:
        return None
    return {"key": TRUST_TAINT_KEY, "value": "_".join(pool.trust_levels), "effect": "NoSchedule"}


def pool_taints(pool: NodePoolSpec) -> list[dict[str, Any]]:
    reserved = trust_taint(pool)
    return [GPU_TAINT, *[t for t in pool.flavor.taints if t.get("key") not in (GPU_TAINT["key"], TRUST_TAINT_KEY)],
            *([reserved] if reserved else [])]


def reserved_pool_tolerations(trust_level: str, cat: Catalog) -> list[str]:
    """vCluster `sync.toHost.pods.enforceTolerations` for a tenant: the reserved pools of this cluster that
    admit its trust level (pools reserved for other levels stay out of reach)."""
    values = sorted({t["value"] for pool in cat.node_pools if trust_level in pool.trust_levels
                     for t in [trust_taint(pool)] if t})
    return [f"{TRUST_TAINT_KEY}={value}:NoSchedule" for value in values]


def _node_pool(name: str, metadata: dict[str, Any], pool: NodePoolSpec, cat: Catalog, *,
               labels: dict[str, str], taints: list[dict[str, Any]], gpu_limit: int) -> Manifest:
    # What the operator declared about the instance types (Karpenter learns it from the cloud provider);
    # read by the journey model and by `gpufleet doctor`, not by Karpenter.
    metadata = {**metadata, "annotations": {GPUS_PER_NODE: str(pool.gpus_per_node)}}
    return {
        "apiVersion": KARPENTER,
        "kind": "NodePool",
        "metadata": metadata,
        "spec": {
            "template": {
                "metadata": {"labels": dict(sorted(labels.items()))},
                "spec": {
                    "nodeClassRef": {"group": cat.node_class_group, "kind": cat.node_class_kind,
                                     "name": pool.node_class},
                    "requirements": requirements(pool, cat),
                    "taints": taints,
                },
            },
            "limits": {sharing.GPU_RESOURCE: gpu_limit},
            "disruption": {
                "consolidationPolicy": pool.consolidation_policy,
                "consolidateAfter": pool.consolidate_after,
            },
        },
    }


def node_pool(pool: NodePoolSpec, cat: Catalog) -> Manifest:
    return _node_pool(pool.name, platform_metadata(pool.name), pool, cat, labels=pool_labels(pool, cat),
                      taints=pool_taints(pool), gpu_limit=pool.gpu_limit)


def overlay_capacity(pool: NodePoolSpec) -> dict[str, str]:
    """Extended resources a node of this pool offers beyond the cloud's `nvidia.com/gpu`: MIG slices
    (mig-parted `all-<profile>`: whole slices per GPU) or HAMi's percentages (100 per GPU)."""
    flavor, gpus = pool.flavor, pool.gpus_per_node
    if flavor.mode == catalog.MIG:
        return {flavor.resource: str(catalog.units_per_gpu(flavor.weight) * gpus)}
    if flavor.mode == catalog.HAMI:
        return {r: str(100 * gpus) for r in flavor.resources if r != flavor.resource}
    return {}


def node_overlay(pool_name: str, metadata: dict[str, Any], pool: NodePoolSpec) -> Manifest | None:
    """Karpenter only launches a node for a pod whose requests an instance type offers; the cloud provider
    knows `nvidia.com/gpu` but not MIG slices or HAMi shares, so without this every MIG/HAMi pod is
    "incompatible with all instance types". NodeOverlay (karpenter.sh/v1alpha1, v1.14.1
    `pkg/apis/crds/karpenter.sh_nodeoverlays.yaml`, feature gate NodeOverlay) appends the capacity for
    the pool's nodes only."""
    capacity = overlay_capacity(pool)
    if not capacity:
        return None
    return {
        "apiVersion": KARPENTER_ALPHA,
        "kind": "NodeOverlay",
        "metadata": metadata,
        "spec": {"requirements": [{"key": "karpenter.sh/nodepool", "operator": "In", "values": [pool_name]}],
                 "capacity": capacity},
    }


def platform_pool_objects(pool: NodePoolSpec, cat: Catalog) -> list[Manifest]:
    overlay = node_overlay(pool.name, platform_metadata(pool.name), pool)
    return [node_pool(pool, cat), *([overlay] if overlay else [])]


def dedicated_pool_name(slug: str, pool: NodePoolSpec) -> str:
    return f"{pool.name}-{slug}"[:63].rstrip("-")


def dedicated_gpu_limit(pool: NodePoolSpec, quota: QuotaSpec | None) -> int:
    """GPUs the tenant's own nodes may add up to: what its quota can admit (nominal + borrowing), rounded
    up to whole nodes -- Karpenter counts a launch against `limits` with the instance's full capacity,
    so a limit below one node's GPUs launches nothing -- and never above the shared pool's limit."""
    if quota is None:
        return 0
    if quota.borrowing_limit is None:
        return pool.gpu_limit
    wanted = quota.nominal + quota.borrowing_limit
    nodes = -(-wanted // pool.gpus_per_node)
    return min(pool.gpu_limit, nodes * pool.gpus_per_node)


def dedicated_pools(slug: str, metadata_of: Any, modes: frozenset[str], quotas: dict[str, QuotaSpec],
                    cat: Catalog) -> list[Manifest]:
    """One NodePool per (shared pool of an allowed mode, tenant with quota on its flavor): the shared
    pool's shape plus the tenant's label and taint (tenants.isolation.policy.placement), so the
    tenant's pods -- which carry that nodeSelector and toleration -- get nodes of their own."""
    out = []
    taint = {"key": DEDICATED_LABEL, "value": slug, "effect": "NoSchedule"}
    for pool in cat.node_pools:
        limit = dedicated_gpu_limit(pool, quotas.get(pool.flavor.name))
        if pool.flavor.mode not in modes or limit <= 0:
            continue
        name = dedicated_pool_name(slug, pool)
        # Its own topology domain too: its nodes come from their own placement group, not the shared pool's.
        labels = {**pool_labels(pool, cat), **topology_labels(name, cat), DEDICATED_LABEL: slug, POOL_LABEL: name}
        out.append(_node_pool(name, metadata_of(name), pool, cat, labels=labels,
                              taints=[*pool_taints(pool), taint], gpu_limit=limit))
        overlay = node_overlay(name, metadata_of(name), pool)
        if overlay:
            out.append(overlay)
    out.append(dedicated_cpu_pool(slug, metadata_of, cat))
    return out


ROLE_LABEL = "gpufleet.io/node-role"


def dedicated_cpu_pool_name(slug: str) -> str:
    return f"cpu-{slug}"[:63].rstrip("-")


def dedicated_cpu_pool(slug: str, metadata_of: Any, cat: Catalog) -> Manifest:
    """Nodes without GPUs for the tenant's other pods (issue 26, B4). vCluster puts the dedicated nodeSelector
    on every pod it syncs (loft-sh/vcluster@v0.36.1:pkg/controllers/resources/pods/syncer.go:211-222), and
    every dedicated GPU pool taints `nvidia.com/gpu`, which a CPU pod (the virtual cluster's CoreDNS first)
    does not tolerate: without this pool it stays Pending and Karpenter launches nothing. Same label and
    taint as the tenant's GPU pools, no GPU taint, and CPU instance types only (pinned: an unpinned pool
    may launch any instance, a GPU one included)."""
    name = dedicated_cpu_pool_name(slug)
    labels = {DEDICATED_LABEL: slug, POOL_LABEL: name, ROLE_LABEL: "cpu"}
    requirements = [
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": sorted(cat.cpu_instance_types)},
    ]
    return {
        "apiVersion": KARPENTER,
        "kind": "NodePool",
        "metadata": metadata_of(name),
        "spec": {
            "template": {
                "metadata": {"labels": dict(sorted(labels.items()))},
                "spec": {
                    "nodeClassRef": {"group": cat.node_class_group, "kind": cat.node_class_kind,
                                     "name": cat.cpu_node_class},
                    "requirements": requirements,
                    "taints": [{"key": DEDICATED_LABEL, "value": slug, "effect": "NoSchedule"}],
                },
            },
            "limits": {"cpu": cat.cpu_pool_limit},
            # CoreDNS runs all the time: the node is kept while it serves, replaced by a cheaper one when
            # Karpenter finds one, and removed when the tenant's pods are gone.
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "10m"},
        },
    }
