"""Desired Kueue, KAI, Karpenter and KEDA objects. Pure: snapshots in (scheduling.inputs), dicts out.

Platform-owned (cluster-wide): ResourceFlavors, Cohorts, WorkloadPriorityClasses, Topologies, the KAI
cohort queues and Karpenter NodePools. Tenant-owned: the tenant's ClusterQueue and KAI Queue
(cluster-scoped but carrying the tenant label, so a quota change touches only the tenant's files),
the `default` LocalQueue and the KEDA ScaledObjects in the tenant namespace.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from infra.manifests import Manifest
from tenants.isolation.config import of_view
from tenants.render import (
    RenderContext,
    TenantView,
    metadata,
    platform_metadata,
    platform_section,
    tenant_section,
)

from . import endpoints, nodepools
from .inputs import Catalog, EndpointSpec, FlavorSpec, QuotaSpec, TenantScheduling
from .policy import modes_of_view

KUEUE = "kueue.x-k8s.io/v1beta2"
KAI = "scheduling.run.ai/v2"
KAI_TOPOLOGY = "kai.scheduler/v1alpha1"
KARPENTER = "karpenter.sh/v1"
KEDA = endpoints.KEDA
GPU_TAINT = nodepools.GPU_TAINT
KAI_QUEUE_LABEL = "kai.scheduler/queue"
# Metric refused as a scaling signal: DCGM's GPU_UTIL is a duty cycle (any kernel running), not load.
REFUSED_METRICS = ("DCGM_FI_DEV_GPU_UTIL",)


def catalog_of(ctx: RenderContext) -> Catalog:
    return ctx.extra.get("scheduling") or Catalog()


def scheduling_of(view: TenantView) -> TenantScheduling | None:
    return view.extra.get("scheduling")


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
    # Pods of this flavor land on GPU nodes (tainted) and TAS must know they tolerate it.
    spec["tolerations"] = [{"key": GPU_TAINT["key"], "operator": "Exists", "effect": "NoSchedule"},
                           *flavor.tolerations]
    if nodepools.topology_aware(flavor, cat):
        spec["topologyName"] = cat.topology_name
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


def render_cohort(name: str, parent: str, weight: Decimal) -> Manifest:
    spec: dict[str, Any] = {"fairSharing": {"weight": quantity(weight)}}
    if parent:
        spec["parentName"] = parent
    return {"apiVersion": KUEUE, "kind": "Cohort", "metadata": platform_metadata(name), "spec": spec}


def kai_cohort_queue(name: str, parent: str, weight: Decimal) -> Manifest:
    # The parent carries no guarantee of its own (-1): its children's quotas are the guarantees, so a
    # tenant's quota change never rewrites a platform object.
    spec: dict[str, Any] = {
        "displayName": f"cohort {name}",
        "resources": {"gpu": {"quota": -1, "limit": -1, "overQuotaWeight": number(weight)}},
    }
    if parent:
        spec["parentQueue"] = cohort_queue_name(parent)
    return {"apiVersion": KAI, "kind": "Queue", "metadata": platform_metadata(cohort_queue_name(name)), "spec": spec}


@platform_section("scheduling")
def render_platform_scheduling(ctx: RenderContext) -> list[Manifest]:
    cat = catalog_of(ctx)
    out: list[Manifest] = [resource_flavor(f, cat) for f in cat.flavors]
    for name, parent, weight in cohort_names(cat):
        out.append(render_cohort(name, parent, weight))
        out.append(kai_cohort_queue(name, parent, weight))
    for name, value, description in cat.priority_classes:
        out.append({"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": platform_metadata(name),
                    "value": value, "description": description or name})
    if cat.topology_levels:
        levels = [{"nodeLabel": label} for label in cat.topology_levels]
        out.append({"apiVersion": KUEUE, "kind": "Topology", "metadata": platform_metadata(cat.topology_name),
                    "spec": {"levels": levels}})
        out.append({"apiVersion": KAI_TOPOLOGY, "kind": "Topology",
                    "metadata": platform_metadata(cat.topology_name), "spec": {"levels": levels}})
    for pool in cat.node_pools:
        out.extend(nodepools.platform_pool_objects(pool, cat))
    return out


# --- tenant objects --------------------------------------------------------------------------------


def allowed_flavors(view: TenantView, cat: Catalog, sched: TenantScheduling) -> list[FlavorSpec]:
    """The flavors the tenant's trust level allows, whole GPUs first (Kueue tries flavors in order)."""
    modes = sched.allowed_modes if sched.allowed_modes is not None else modes_of_view(view)
    order = {"whole": 0, "mig": 1, "hami": 2}
    return sorted((f for f in cat.flavors if f.mode in modes), key=lambda f: (order[f.mode], f.name))


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


def cluster_queue(view: TenantView, cat: Catalog, sched: TenantScheduling) -> Manifest:
    flavors = allowed_flavors(view, cat, sched)
    spec: dict[str, Any] = {
        "cohortName": sched.cohort,
        # Only the tenant's own host namespace may submit to its queue.
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": view.namespace}},
        "queueingStrategy": "BestEffortFIFO",
        "fairSharing": {"weight": quantity(sched.weight)},
        "preemption": {
            # Get lent quota back from borrowers; borrow by preempting lower-priority work in the cohort;
            # inside the queue, higher priority preempts lower.
            "reclaimWithinCohort": "Any",
            "borrowWithinCohort": {"policy": "LowerPriority",
                                   "maxPriorityThreshold": cat.priority_value(sched.priority_class)},
            "withinClusterQueue": "LowerPriority",
        },
        "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
        "resourceGroups": resource_groups(flavors, sched.quotas, cohort=bool(sched.cohort)),
    }
    if view.suspended:
        spec["stopPolicy"] = "Hold"
    meta = metadata(view, cluster_queue_name(view.slug), namespaced=False)
    meta["annotations"] = {"gpufleet.io/priority-class": sched.priority_class}
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": meta, "spec": spec}


def gpu_equivalents(flavors: list[FlavorSpec], quotas: dict[str, QuotaSpec]) -> tuple[Decimal, Decimal | None]:
    """KAI counts GPUs: quota = sum(nominal x weight); limit = sum((nominal + borrowing) x weight), or
    None (no limit) when any allowed flavor may borrow without limit."""
    quota, limit = Decimal(0), Decimal(0)
    unlimited = False
    for flavor in flavors:
        q = quotas.get(flavor.name, QuotaSpec(0))
        quota += q.nominal * flavor.weight
        if q.borrowing_limit is None:
            unlimited = True
        else:
            limit += (q.nominal + q.borrowing_limit) * flavor.weight
    return quota, None if unlimited else limit


def kai_queue(view: TenantView, cat: Catalog, sched: TenantScheduling) -> Manifest:
    quota, limit = gpu_equivalents(allowed_flavors(view, cat, sched), sched.quotas)
    if view.suspended:
        quota, limit = Decimal(0), Decimal(0)
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
                "gpu": {"quota": number(quota), "limit": -1 if limit is None else number(limit),
                        "overQuotaWeight": number(sched.weight)},
                "cpu": unbounded,
                "memory": unbounded,
            },
        },
    }


def endpoint_manifests(view: TenantView, cat: Catalog, endpoint: EndpointSpec) -> list[Manifest]:
    """The platform-owned serving Deployment, Service, scrape object and ScaledObject (scheduling.endpoints)."""
    meta = metadata(view, endpoints.object_name(endpoint))
    placement = of_view(view).placement
    return [
        endpoints.serving_deployment(meta, endpoint, cat.vllm_image, node_selector=placement.node_selector,
                                     tolerations=list(placement.tolerations)),
        endpoints.service(meta, endpoint),
        endpoints.service_scrape(meta, endpoint),
        endpoints.scaled_object(meta, view.namespace, cat, endpoint, suspended=view.suspended, quantity=quantity),
    ]


@tenant_section("scheduling")
def render_tenant_scheduling(view: TenantView, ctx: RenderContext) -> list[Manifest]:
    sched = scheduling_of(view)
    if sched is None:
        return []
    cat = catalog_of(ctx)
    local_queue = {
        "apiVersion": KUEUE,
        "kind": "LocalQueue",
        # Named `default`: Kueue's LocalQueueDefaulting admits jobs without a queue-name label here.
        "metadata": metadata(view, "default"),
        "spec": {"clusterQueue": cluster_queue_name(view.slug)},
    }
    out = [cluster_queue(view, cat, sched), local_queue, kai_queue(view, cat, sched)]
    for endpoint in sched.endpoints:
        out.extend(endpoint_manifests(view, cat, endpoint))
    placement = of_view(view).placement
    if placement.node_selector:
        # Dedicated nodes (untrusted): pools carrying the tenant's label and taint, or its pods never get
        # a node -- no shared pool defines gpufleet.io/dedicated-tenant (scheduling.nodepools).
        modes = sched.allowed_modes if sched.allowed_modes is not None else modes_of_view(view)
        out.extend(nodepools.dedicated_pools(
            view.slug, lambda name: metadata(view, name, namespaced=False), modes, sched.quotas, cat))
    return out
