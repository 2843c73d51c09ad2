"""Render inputs: immutable snapshots of the catalog and of one tenant's scheduling rows.

Loaded at the edge (one query per table), handed to the pure render functions through
RenderContext.extra["scheduling"] and TenantView.extra["scheduling"].
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.conf import settings

from . import catalog
from .defaults import DEFAULT_PRIORITY_CLASS, PRIORITY_CLASSES


@dataclass(frozen=True)
class FlavorSpec:
    name: str
    gpu_model: str
    product_label: str
    mode: str
    mig_profile: str
    memory_percent: int | None
    cores_percent: int | None
    weight: Decimal
    capacity: int
    node_labels: dict[str, str]
    tolerations: list[dict[str, Any]]
    taints: list[dict[str, Any]]

    @property
    def resources(self) -> list[str]:
        return catalog.covered_resources(self.mode, self.mig_profile, self.memory_percent, self.cores_percent)

    @property
    def resource(self) -> str:
        return self.resources[0]

    @property
    def kai_units(self) -> int:
        """What KAI charges a queue's `gpu` for one unit of this flavor: 1 for a whole GPU, the compute
        slices for a MIG instance (KAI v0.13.0 sums MIG scalars into its GPU count by their `<n>g`,
        pkg/scheduler/api/resource_info, see kai-scheduler/KAI-Scheduler#987), and 0 for HAMi, whose
        pods KAI never sees (hami-scheduler binds them)."""
        if self.mode == catalog.WHOLE:
            return 1
        if self.mode == catalog.MIG:
            match = catalog.MIG_PROFILE.match(self.mig_profile)
            return int(match["slices"]) if match else 0
        return 0

    def per_unit(self, resource: str) -> int:
        """Amount of `resource` one unit of this flavor requests (HAMi percentages per vGPU)."""
        if resource == catalog.HAMI_CORES:
            return self.cores_percent or 0
        if resource == catalog.HAMI_MEMORY_PERCENT:
            return self.memory_percent or 0
        return 1


@dataclass(frozen=True)
class CohortSpec:
    name: str
    parent: str
    weight: Decimal


@dataclass(frozen=True)
class NodePoolSpec:
    name: str
    flavor: FlavorSpec
    instance_types: list[str]
    capacity_types: list[str]
    gpu_limit: int
    node_class: str
    consolidation_policy: str
    consolidate_after: str
    gpus_per_node: int = 8


@dataclass(frozen=True)
class Catalog:
    flavors: tuple[FlavorSpec, ...] = ()
    cohorts: tuple[CohortSpec, ...] = ()
    priority_classes: tuple[tuple[str, int, str], ...] = ()
    node_pools: tuple[NodePoolSpec, ...] = ()
    default_cohort: str = "gpufleet"
    topology_name: str = "gpu-topology"
    topology_levels: tuple[str, ...] = ()
    metrics_url: str = ""
    business_timezone: str = "UTC"
    node_class_group: str = "karpenter.k8s.aws"
    node_class_kind: str = "EC2NodeClass"
    # Kueue's Configuration.fairSharing is on (GPUFLEET_KUEUE_FAIR_SHARING); off = classical preemption.
    fair_sharing: bool = False
    # The serving image of platform-owned inference Deployments (scheduling.endpoints).
    vllm_image: str = "vllm/vllm-openai:v0.33.0"

    def flavor(self, name: str) -> FlavorSpec | None:
        return next((f for f in self.flavors if f.name == name), None)

    def priority_value(self, name: str) -> int:
        return next((value for n, value, _ in self.priority_classes if n == name), 0)


@dataclass(frozen=True)
class QuotaSpec:
    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(frozen=True)
class EndpointSpec:
    name: str
    model: str
    deployment: str
    tier: str
    min_replicas: int
    max_replicas: int
    cooldown_seconds: int
    polling_seconds: int
    prewarm_start: str
    prewarm_end: str
    prewarm_replicas: int
    queue_target: int
    kv_cache_target: Decimal


@dataclass(frozen=True)
class TenantScheduling:
    # None: take them from the isolation app's view (policy.modes_of_view), loaded once per tenant.
    allowed_modes: frozenset[str] | None
    cohort: str
    weight: Decimal = Decimal(1)
    priority_class: str = DEFAULT_PRIORITY_CLASS
    quotas: dict[str, QuotaSpec] = field(default_factory=dict)
    endpoints: tuple[EndpointSpec, ...] = ()

    def with_quota(self, flavor: str, quota: QuotaSpec) -> TenantScheduling:
        """The same tenant with one quota replaced (what a change request would render)."""
        return TenantScheduling(self.allowed_modes, self.cohort, self.weight, self.priority_class,
                                {**self.quotas, flavor: quota}, self.endpoints)


def flavor_spec(flavor: Any) -> FlavorSpec:
    return FlavorSpec(
        name=flavor.name,
        gpu_model=flavor.gpu_model.name,
        product_label=flavor.gpu_model.node_label_value,
        mode=flavor.mode,
        mig_profile=flavor.mig_profile,
        memory_percent=flavor.memory_percent,
        cores_percent=flavor.cores_percent,
        weight=flavor.weight,
        capacity=flavor.capacity,
        node_labels=dict(flavor.node_labels or {}),
        tolerations=list(flavor.tolerations or []),
        taints=list(flavor.taints or []),
    )


def load_catalog() -> dict[str, Catalog]:
    from .models import Cohort, Flavor, GpuNodePool, PriorityClass

    flavors = {f.pk: flavor_spec(f) for f in Flavor.objects.select_related("gpu_model")}
    return {
        "scheduling": Catalog(
            flavors=tuple(flavors.values()),
            cohorts=tuple(
                CohortSpec(c.name, c.parent.name if c.parent else "", c.fair_sharing_weight)
                for c in Cohort.objects.select_related("parent")
            ),
            # Seeded by migration; the defaults stand in if the table was emptied since.
            priority_classes=tuple(PriorityClass.objects.values_list("name", "value", "description"))
            or tuple(PRIORITY_CLASSES),
            node_pools=tuple(
                NodePoolSpec(p.name, flavors[p.flavor_id], list(p.instance_types), list(p.capacity_types),
                             p.gpu_limit, p.node_class, p.consolidation_policy, p.consolidate_after,
                             p.gpus_per_node)
                for p in GpuNodePool.objects.all()
            ),
            default_cohort=settings.GPUFLEET_DEFAULT_COHORT,
            topology_name=settings.GPUFLEET_TOPOLOGY_NAME,
            topology_levels=tuple(settings.GPUFLEET_TOPOLOGY_LEVELS),
            metrics_url=settings.GPUFLEET_METRICS_URL,
            business_timezone=settings.GPUFLEET_BUSINESS_TIMEZONE,
            node_class_group=settings.GPUFLEET_KARPENTER_NODE_CLASS_GROUP,
            node_class_kind=settings.GPUFLEET_KARPENTER_NODE_CLASS_KIND,
            fair_sharing=settings.GPUFLEET_KUEUE_FAIR_SHARING,
            vllm_image=getattr(settings, "GPUFLEET_VLLM_IMAGE", "") or Catalog.vllm_image,
        )
    }


def load_tenant(tenant: Any) -> dict[str, TenantScheduling]:
    """VIEW_EXTRAS loader: a constant number of queries whatever the number of quotas or endpoints
    (three of ours plus the isolation policy's). Mirrored for fleet passes by inputs_many."""
    from .models import InferenceEndpoint, Quota
    from .models import TenantScheduling as Settings
    from .policy import allowed_modes

    row = Settings.objects.select_related("cohort", "priority_class").filter(tenant_id=tenant.pk).first()
    quotas = {
        name: QuotaSpec(nominal, borrowing, lending)
        for name, nominal, borrowing, lending in Quota.objects.filter(tenant_id=tenant.pk).values_list(
            "flavor__name", "nominal", "borrowing_limit", "lending_limit"
        )
    }
    endpoints = tuple(
        endpoint_spec(e)
        for e in InferenceEndpoint.objects.filter(tenant_id=tenant.pk).select_related("tier").order_by("name")
    )
    return {"scheduling": tenant_scheduling(row, frozenset(allowed_modes(tenant)), quotas, endpoints)}


def endpoint_spec(e: Any) -> EndpointSpec:
    """An InferenceEndpoint row (its `tier` selected with it) as render input."""
    return EndpointSpec(
        e.name, e.model, e.deployment, e.tier.name, e.tier.min_replicas, e.tier.max_replicas,
        e.tier.cooldown_seconds, e.tier.polling_seconds, e.tier.prewarm_start, e.tier.prewarm_end,
        e.tier.prewarm_replicas, e.queue_target, e.kv_cache_target,
    )


def tenant_scheduling(row: Any, modes: frozenset[str], quotas: dict[str, QuotaSpec],
                      endpoints: tuple[EndpointSpec, ...]) -> TenantScheduling:
    """A tenant's render input from its TenantScheduling row (None: the platform defaults) and the rest."""
    return TenantScheduling(
        allowed_modes=modes,
        cohort=(row.cohort.name if row and row.cohort else settings.GPUFLEET_DEFAULT_COHORT),
        weight=row.fair_sharing_weight if row else Decimal(1),
        priority_class=(row.priority_class.name if row and row.priority_class else DEFAULT_PRIORITY_CLASS),
        quotas=quotas,
        endpoints=endpoints,
    )
