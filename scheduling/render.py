"""Desired Kueue, KAI, Karpenter and KEDA objects. Pure: snapshots in (scheduling.inputs), dicts out.

Platform-owned (cluster-wide): ResourceFlavors, Cohorts, WorkloadPriorityClasses, Topologies, the KAI
cohort queues and Karpenter NodePools. Tenant-owned: the tenant's ClusterQueue and KAI Queue
(cluster-scoped but carrying the tenant label, so a quota change touches only the tenant's files),
the `gpu` LocalQueue, the Kyverno policies that route GPU pods to it (and to KAI) and restrict priority
classes, and the KEDA ScaledObjects in the tenant namespace; and the GPU keys of the tenant's backstop
ResourceQuota (the registry's `quota_hard`, see scheduling.contributions).

How a pod travels through these objects (and why each is shaped as it is) is in docs/scheduling.md and
proven step by step in tests/journey.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

from gpufleet.core import sharing
from infra.manifests import Manifest
from scheduling import context
from scheduling.endpoints import render as endpoints
from scheduling.nodepools import render as nodepools
from tenants import syncer_gates
from tenants.isolation.config import of_view
from tenants.render import (
    RenderContext,
    TenantView,
    metadata,
    platform_metadata,
)

from . import routing
from .defaults import PRIORITY_CLASSES
from .inputs import Catalog, EndpointSpec, FlavorSpec, QuotaSpec, TenantScheduling, scheduling_of
from .policy import modes_of_view

KUEUE = "kueue.x-k8s.io/v1beta2"
KAI = "scheduling.run.ai/v2"
KAI_TOPOLOGY = "kai.scheduler/v1alpha1"
KARPENTER = "karpenter.sh/v1"
KEDA = endpoints.KEDA
GPU_TAINT = nodepools.GPU_TAINT
KAI_QUEUE_LABEL = "kai.scheduler/queue"
# The tenant's only LocalQueue. Not `default`: Kueue's LocalQueueDefaulting (GA in v0.19) would put
# every pod and StatefulSet of the namespace in a queue named `default` -- the vCluster control plane
# included. Pods reach `gpu` only through the routing policy below (GPU pods) or by naming it.
LOCAL_QUEUE = "gpu"
# Kueue's default quotaCheckStrategy (BlockUndeclared) refuses a workload asking for a resource its
# ClusterQueue does not cover, and every GPU pod asks for cpu and memory; v0.19.2's ClusterQueue has no
# per-queue switch (no such field in kueue.x-k8s.io_clusterqueues.yaml), so cpu/memory are covered in a
# group of their own, on a flavor with no node labels (it constrains nothing but quota).
HOST_FLAVOR = "gpufleet-host"
# A GPU's share of its node, what the cpu/memory quota grants per GPU-equivalent the tenant may hold:
# an 8-GPU H100 node (p5.48xlarge) has 192 vCPUs and 2 TiB, i.e. 24 vCPUs and 256 GiB per GPU.
CPU_PER_GPU = 24
MEMORY_GIB_PER_GPU = 256
# Metric refused as a scaling signal: DCGM's GPU_UTIL is a duty cycle (any kernel running), not load.
REFUSED_METRICS = ("DCGM_FI_DEV_GPU_UTIL",)


def catalog_of(ctx: RenderContext) -> Catalog:
    return context.catalog_in(ctx) or Catalog()


def number(value: Decimal) -> int | float:
    """YAML number for a Decimal: an int when whole, so output stays byte-stable and readable."""
    return int(value) if value == value.to_integral_value() else float(value)


def quantity(value: Decimal) -> str:
    return str(value.normalize()) if value != value.to_integral_value() else str(int(value))


def cluster_queue_name(slug: str) -> str:
    return f"tenant-{slug}"


def cohort_queue_name(cohort: str) -> str:
    return f"cohort-{cohort}"


# --- platform objects ------------------------------------------------------------------------------


def resource_flavor(flavor: FlavorSpec, cat: Catalog) -> Manifest:
    labels = nodepools.flavor_node_labels(flavor)
    spec: dict[str, Any] = {}
    if labels:
        spec["nodeLabels"] = dict(sorted(labels.items()))
    if flavor.taints:
        spec["nodeTaints"] = flavor.taints
    # Pods of this flavor land on GPU nodes (tainted): Kueue adds these tolerations to the admitted pod.
    spec["tolerations"] = [{"key": GPU_TAINT["key"], "operator": "Exists", "effect": "NoSchedule"},
                           *flavor.tolerations]
    # Never `topologyName` (issue 26, B1; docs/compatibility.md#b1): every ClusterQueue also holds the non-TAS
    # gpufleet-host flavor for cpu/memory, so with a TAS GPU flavor Kueue refuses every pod -- without a
    # topology request "supports only TopologyAwareScheduling", with one "gpufleet-host does not support
    # TopologyAwareScheduling" (kubernetes-sigs/kueue@v0.19.2:pkg/scheduler/flavorassigner/
    # tas_flavorassigner.go:166-200) -- and TAS places pods only on nodes that exist (no Karpenter scale-up,
    # tas_flavorassigner.go:104-108). scheduling.nodepools.render.kueue_tas_refusal says why for each flavor.
    return {
        "apiVersion": KUEUE,
        "kind": "ResourceFlavor",
        "metadata": platform_metadata(flavor.name, **{"gpufleet.io/flavor-mode": flavor.mode}),
        "spec": spec,
    }


def cohort_names(cat: Catalog) -> list[tuple[str, str, Decimal]]:
    """Configured cohorts plus the default root every unassigned tenant joins."""
    cohorts = [(c.name, c.parent, c.weight) for c in cat.cohorts]
    if all(name != cat.default_cohort for name, _, _ in cohorts):
        cohorts.append((cat.default_cohort, "", Decimal(1)))
    return sorted(cohorts)


def render_cohort(name: str, parent: str, weight: Decimal, cat: Catalog) -> Manifest:
    # fairSharing.weight does nothing unless Kueue's Configuration enables fair sharing.
    spec: dict[str, Any] = {"fairSharing": {"weight": quantity(weight)}} if cat.fair_sharing else {}
    if parent:
        spec["parentName"] = parent
    return {"apiVersion": KUEUE, "kind": "Cohort", "metadata": platform_metadata(name), "spec": spec}


def kai_cohort_queue(name: str, parent: str, weight: Decimal) -> Manifest:
    # The parent carries no guarantee of its own (-1): its children's quotas are the guarantees, so a
    # tenant's quota change never rewrites a platform object.
    # In KAI an omitted resource is a zero limit (every child pod OverLimit); cpu and memory are
    # unlimited here, like KAI's own default-parent-queue example (examples/quickstart, v0.13.0).
    spec: dict[str, Any] = {
        "displayName": f"cohort {name}",
        "resources": {"gpu": {"quota": -1, "limit": -1, "overQuotaWeight": number(weight)},
                      "cpu": {"quota": -1, "limit": -1, "overQuotaWeight": 1},
                      "memory": {"quota": -1, "limit": -1, "overQuotaWeight": 1}},
    }
    if parent:
        spec["parentQueue"] = cohort_queue_name(parent)
    return {"apiVersion": KAI, "kind": "Queue", "metadata": platform_metadata(cohort_queue_name(name)), "spec": spec}


def render_platform_scheduling(ctx: RenderContext) -> list[Manifest]:
    cat = catalog_of(ctx)
    out: list[Manifest] = [resource_flavor(f, cat) for f in cat.flavors]
    out.append({"apiVersion": KUEUE, "kind": "ResourceFlavor",
                "metadata": platform_metadata(HOST_FLAVOR, **{"gpufleet.io/flavor-mode": "host"}), "spec": {}})
    for name, parent, weight in cohort_names(cat):
        out.append(render_cohort(name, parent, weight, cat))
        out.append(kai_cohort_queue(name, parent, weight))
    for name, value, description in cat.priority_classes:
        out.append({"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": platform_metadata(name),
                    "value": value, "description": description or name})
    if cat.topology_levels:
        # KAI's Topology only: KAI places a pod by topology when the pod asks (its own annotations), after
        # Kueue admitted it, on nodes Karpenter may still create. No Kueue Topology: no flavor refers to one.
        levels = [{"nodeLabel": label} for label in cat.topology_levels]
        out.append({"apiVersion": KAI_TOPOLOGY, "kind": "Topology",
                    "metadata": platform_metadata(cat.topology_name), "spec": {"levels": levels}})
    for pool in cat.node_pools:
        out.extend(nodepools.platform_pool_objects(pool, cat))
    return out


# --- tenant objects --------------------------------------------------------------------------------


def allowed_flavors(view: TenantView, cat: Catalog, sched: TenantScheduling) -> list[FlavorSpec]:
    """The flavors the tenant's trust level allows, in the registry's mode order (Kueue tries flavors in order)."""
    modes = sched.allowed_modes if sched.allowed_modes is not None else modes_of_view(view)
    return sorted((f for f in cat.flavors if f.mode in modes), key=lambda f: (sharing.position(f.mode), f.name))


def resource_groups(flavors: list[FlavorSpec], quotas: dict[str, QuotaSpec], *, cohort: bool) -> list[dict]:
    """One group per counted resource (nvidia.com/gpu, each MIG profile). Kueue requires every flavor of
    a group to list every covered resource, so a whole GPU lists HAMi's percentages with quota 0."""
    groups: dict[str, list[FlavorSpec]] = {}
    for flavor in flavors:
        groups.setdefault(flavor.resource, []).append(flavor)
    out = []
    for members in groups.values():
        covered: list[str] = []
        for flavor in members:
            covered.extend(r for r in flavor.resources if r not in covered)
        entries = []
        for flavor in members:
            quota = quotas.get(flavor.name, QuotaSpec(0))
            resources = []
            for resource in covered:
                scale = flavor.per_unit(resource) if resource in flavor.resources else 0
                item: dict[str, Any] = {"name": resource, "nominalQuota": quota.nominal * scale}
                # Kueue accepts borrowing and lending limits only for queues in a cohort.
                if cohort and quota.borrowing_limit is not None:
                    item["borrowingLimit"] = quota.borrowing_limit * scale
                if cohort and quota.lending_limit is not None:
                    item["lendingLimit"] = quota.lending_limit * scale
                resources.append(item)
            entries.append({"name": flavor.name, "resources": resources})
        out.append({"coveredResources": covered, "flavors": entries})
    return out


def unit_bound(flavor: FlavorSpec, quota: QuotaSpec) -> int:
    """The most units of `flavor` the tenant can ever hold: nominal + borrowing limit, or (borrowing
    without limit) everything the fleet has of it."""
    if quota.borrowing_limit is not None:
        return quota.nominal + quota.borrowing_limit
    return max(quota.nominal, flavor.capacity)


def gpu_equivalent_bound(flavors: list[FlavorSpec], quotas: dict[str, QuotaSpec]) -> Decimal:
    return sum((unit_bound(f, quotas.get(f.name, QuotaSpec(0))) * f.weight for f in flavors), Decimal(0))


def host_resource_group(flavors: list[FlavorSpec], quotas: dict[str, QuotaSpec]) -> dict[str, Any]:
    """cpu/memory for the tenant's GPU pods (only Kueue-managed pods count: the control plane is not)."""
    gpus = math.ceil(gpu_equivalent_bound(flavors, quotas))
    return {
        "coveredResources": ["cpu", "memory"],
        "flavors": [{"name": HOST_FLAVOR, "resources": [
            {"name": "cpu", "nominalQuota": gpus * CPU_PER_GPU},
            {"name": "memory", "nominalQuota": f"{gpus * MEMORY_GIB_PER_GPU}Gi"},
        ]}],
    }


def cluster_queue(view: TenantView, cat: Catalog, sched: TenantScheduling) -> Manifest:
    flavors = allowed_flavors(view, cat, sched)
    preemption: dict[str, Any] = {
        # Get lent quota back from borrowers; inside the queue, higher priority preempts lower.
        "reclaimWithinCohort": "Any",
        "withinClusterQueue": "LowerPriority",
    }
    if not cat.fair_sharing:
        # Borrow by preempting lower-priority work in the cohort: classical preemption only (Kueue
        # ignores borrowWithinCohort under fair sharing).
        preemption["borrowWithinCohort"] = {"policy": "LowerPriority",
                                            "maxPriorityThreshold": cat.priority_value(sched.priority_class)}
    spec: dict[str, Any] = {
        "cohortName": sched.cohort,
        # Only the tenant's own host namespace may submit to its queue.
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": view.namespace}},
        "queueingStrategy": "BestEffortFIFO",
        "preemption": preemption,
        "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
        "resourceGroups": [*resource_groups(flavors, sched.quotas, cohort=bool(sched.cohort)),
                           host_resource_group(flavors, sched.quotas)],
    }
    if cat.fair_sharing:
        spec["fairSharing"] = {"weight": quantity(sched.weight)}
    if view.suspended:
        spec["stopPolicy"] = "Hold"
    meta = metadata(view, cluster_queue_name(view.slug), namespaced=False)
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": meta, "spec": spec}


def kai_flavors(flavors: list[FlavorSpec]) -> list[FlavorSpec]:
    """The flavors whose pods KAI schedules (whole GPUs and MIG; HAMi pods go to hami-scheduler)."""
    return [f for f in flavors if f.kai_units]


def kai_gpus(flavors: list[FlavorSpec], quotas: dict[str, QuotaSpec]) -> tuple[int, int | None]:
    """The tenant's quota in KAI's units (FlavorSpec.kai_units): quota = sum(nominal x units); limit =
    sum((nominal + borrowing) x units), or None (no limit) when any flavor may borrow without limit."""
    quota, limit = 0, 0
    unlimited = False
    for flavor in kai_flavors(flavors):
        q = quotas.get(flavor.name, QuotaSpec(0))
        quota += q.nominal * flavor.kai_units
        if q.borrowing_limit is None:
            unlimited = True
        else:
            limit += (q.nominal + q.borrowing_limit) * flavor.kai_units
    return quota, None if unlimited else limit


def kai_queue(view: TenantView, cat: Catalog, sched: TenantScheduling) -> Manifest | None:
    flavors = allowed_flavors(view, cat, sched)
    if not kai_flavors(flavors):
        return None  # a HAMi-only tenant: KAI never schedules its pods
    quota, limit = kai_gpus(flavors, sched.quotas)
    if view.suspended:
        quota, limit = 0, 0
    unbounded = {"quota": -1, "limit": -1, "overQuotaWeight": 1}
    return {
        "apiVersion": KAI,
        "kind": "Queue",
        "metadata": metadata(view, cluster_queue_name(view.slug), namespaced=False),
        "spec": {
            "displayName": view.display_name,
            "parentQueue": cohort_queue_name(sched.cohort),
            "priority": cat.priority_value(sched.priority_class),
            "resources": {
                "gpu": {"quota": quota, "limit": -1 if limit is None else limit,
                        "overQuotaWeight": number(sched.weight)},
                "cpu": unbounded,
                "memory": unbounded,
            },
        },
    }


def endpoint_manifests(view: TenantView, cat: Catalog, endpoint: EndpointSpec,
                       sched: TenantScheduling) -> list[Manifest]:
    """The platform-owned serving Deployment, Service, scrape object and ScaledObject (scheduling.endpoints)."""
    meta = metadata(view, endpoints.object_name(endpoint))
    placement = of_view(view).placement
    priority = endpoints.priority_class(endpoint.tier, cat.priority_classes or PRIORITY_CLASSES, sched.priority_class)
    return [
        endpoints.serving_deployment(meta, endpoint, cat.vllm_image, node_selector=placement.node_selector,
                                     tolerations=list(placement.tolerations), priority=priority),
        endpoints.service(meta, endpoint),
        endpoints.service_scrape(meta, endpoint),
        endpoints.scaled_object(meta, view.namespace, cat, endpoint, suspended=view.suspended, quantity=quantity),
    ]


def render_tenant_scheduling(view: TenantView, ctx: RenderContext) -> list[Manifest]:
    sched = scheduling_of(view)
    if sched is None:
        return []
    cat = catalog_of(ctx)
    local_queue = {
        "apiVersion": KUEUE,
        "kind": "LocalQueue",
        "metadata": metadata(view, LOCAL_QUEUE),
        "spec": {"clusterQueue": cluster_queue_name(view.slug)},
    }
    out = [cluster_queue(view, cat, sched), local_queue, routing.routing_policy(view, LOCAL_QUEUE),
           routing.priority_policy(view, allowed_priority_classes(cat, sched))]
    if not syncer_gates.keeps_host_gates(ctx.vcluster_chart_version, ctx.vcluster_syncer_image):
        # B3: the stock syncer strips Kueue's gates, so Kueue would delete every GPU pod: refuse them loudly.
        out.append(routing.syncer_gate_policy(view, syncer_gates.tenant_message(ctx.vcluster_chart_version)))
    kai = kai_queue(view, cat, sched)
    if kai is not None:
        out.append(kai)
    for endpoint in sched.endpoints:
        out.extend(endpoint_manifests(view, cat, endpoint, sched))
    if sched.endpoints:  # what every serving pod of the tenant needs: the token and the way to the hub
        out.extend(endpoints.hf_token_objects(lambda name: metadata(view, name), view.slug, cat))
        out.append(endpoints.model_hub_egress(metadata(view, "gpufleet-model-hub"), cat))
    placement = of_view(view).placement
    if placement.node_selector:
        # Dedicated nodes (untrusted): pools carrying the tenant's label and taint, or its pods never get
        # a node -- no shared pool defines gpufleet.io/dedicated-tenant (scheduling.nodepools).
        modes = sched.allowed_modes if sched.allowed_modes is not None else modes_of_view(view)
        out.extend(nodepools.dedicated_pools(
            view.slug, lambda name: metadata(view, name, namespaced=False), modes, sched.quotas, cat))
    return out


def allowed_priority_classes(cat: Catalog, sched: TenantScheduling) -> list[str]:
    """The WorkloadPriorityClasses a tenant may label pods with: those not above its own class."""
    ceiling = cat.priority_value(sched.priority_class)
    classes = cat.priority_classes or tuple(PRIORITY_CLASSES)
    return sorted(name for name, value, _ in classes if value <= ceiling)


def gpu_quota_keys(view: TenantView, ctx: RenderContext) -> dict[str, str]:
    """The backstop ResourceQuota's GPU keys: per extended resource, the most the tenant can hold through
    Kueue (unit_bound per allowed flavor). Extended resources only take the `requests.` prefix. A pod
    that escaped Kueue (vCluster's syncer strips Kueue's gate, docs/isolation.md) is still refused
    beyond this at creation. Without scheduling data: no GPUs at all."""
    sched = scheduling_of(view)
    hard: dict[str, int] = {f"requests.{sharing.GPU_RESOURCE}": 0}
    if sched is None:
        return {k: str(v) for k, v in hard.items()}
    for flavor in allowed_flavors(view, catalog_of(ctx), sched):
        bound = unit_bound(flavor, sched.quotas.get(flavor.name, QuotaSpec(0)))
        for resource in flavor.resources:
            key = f"requests.{resource}"
            hard[key] = hard.get(key, 0) + bound * flavor.per_unit(resource)
    return {k: str(v) for k, v in sorted(hard.items())}

