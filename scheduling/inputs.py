"""Render inputs: immutable snapshots of the catalog and of one tenant's scheduling rows.

Loaded at the edge (one query per table), handed to the pure render functions through
the render context (scheduling.context) and TenantView.scheduling.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

from gpufleet.core import conf, sharing
from scheduling import context
from scheduling.catalog import revision as catalog_revision
from scheduling.catalog import rules as catalog

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
    # Memory of one GPU of the model (GpuModel.memory_mib): A100 comes in 40 and 80 GB; 0 = not known.
    gpu_memory_mib: int = 0

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
        pods KAI never sees (hami-scheduler binds them): a mode's scheduler is the registry's."""
        if sharing.get(self.mode).scheduler != sharing.KAI_SCHEDULER:
            return 0
        if self.mode == catalog.MIG:
            match = catalog.MIG_PROFILE.match(self.mig_profile)
            return int(match["slices"]) if match else 0
        return 1

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
    # Tenant trust levels whose pods may run on the pool's nodes (empty: every level the cluster allows).
    trust_levels: tuple[str, ...] = ()


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
    # The CPU NodePool each dedicated (untrusted) tenant gets for its pods without GPUs -- its CoreDNS first
    # (issue 26, B4): instance types, node class and the pool's cpu limit
    # (scheduling.nodepools.render.dedicated_cpu_pool).
    cpu_instance_types: tuple[str, ...] = ("m7i.large", "m7i.xlarge", "m7i.2xlarge")
    cpu_node_class: str = "default"
    cpu_pool_limit: int = 16
    # Where the platform's metrics scraper runs (GPUFLEET_MONITORING_NAMESPACE): Kueue's chart lets it scrape.
    monitoring_namespace: str = "monitoring"
    # The clusters serve prometheus-operator's CRDs (GPUFLEET_PROMETHEUS_OPERATOR): Kueue's chart then renders
    # its ServiceMonitor. Off by default: nothing the platform requires installs them (issue 26, F11).
    prometheus_operator: bool = False
    # Where inference endpoints download models from (GPUFLEET_MODEL_HUB_FQDNS): their only egress.
    model_hub_fqdns: tuple[str, ...] = ("huggingface.co", "**.huggingface.co", "**.hf.co")
    # OpenBao for the endpoints' Hugging Face token (External Secrets' vault provider); "" = not configured.
    openbao_addr: str = ""
    openbao_mount: str = "gpufleet"
    openbao_kubernetes_auth: str = "kubernetes"

    def flavor(self, name: str) -> FlavorSpec | None:
        return next((f for f in self.flavors if f.name == name), None)

    def priority_value(self, name: str) -> int:
        return next((value for n, value, _ in self.priority_classes if n == name), 0)


@dataclass(frozen=True)
class ClusterSpec:
    """A host cluster as render input: where its objects go and its own catalog (the flavors offered there,
    with its capacity, and its node pools)."""

    name: str
    tree: str
    purpose: str = "general"
    region: str = ""
    trust_levels: tuple[str, ...] = ()
    catalog: Catalog = field(default_factory=Catalog)


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
    gated: bool = False  # needs the tenant's Hugging Face token (scheduling.endpoints: required, not optional)


@dataclass(frozen=True)
class TenantScheduling:
    # None: take them from the isolation app's view (policy.modes_of_view), loaded once per tenant.
    allowed_modes: frozenset[str] | None
    cohort: str
    weight: Decimal = Decimal(1)
    priority_class: str = DEFAULT_PRIORITY_CLASS
    # The quotas on the home cluster (a single-cluster installation: all of them).
    quotas: dict[str, QuotaSpec] = field(default_factory=dict)
    endpoints: tuple[EndpointSpec, ...] = ()
    # cluster name -> flavor -> quota, on every cluster (empty: `quotas` is all there is).
    by_cluster: dict[str, dict[str, QuotaSpec]] = field(default_factory=dict)
    # (cluster name, home) of each placement, home first (empty: home on `default`).
    placements: tuple[tuple[str, bool], ...] = ()
    # Clusters of removed placements whose objects are still to be pruned.
    leaving: tuple[str, ...] = ()

    @property
    def home(self) -> str:
        return next((name for name, home in self.placements if home), "")

    def with_quota(self, flavor: str, quota: QuotaSpec, cluster: str = "") -> TenantScheduling:
        """The same tenant with one quota replaced (what a change request would render); `cluster` ''
        = the home cluster."""
        cluster = cluster or self.home
        quotas = {**self.quotas, flavor: quota} if cluster == self.home else self.quotas
        by_cluster = {**self.by_cluster, cluster: {**self.by_cluster.get(cluster, {}), flavor: quota}} \
            if cluster else self.by_cluster
        return replace(self, quotas=quotas, by_cluster=by_cluster)

    def on(self, cluster: str, home: bool) -> TenantScheduling:
        """The tenant as rendered on one cluster: that cluster's quotas; endpoints on the home cluster."""
        quotas = self.by_cluster.get(cluster, {}) if self.by_cluster else self.quotas
        return replace(self, quotas=quotas, endpoints=self.endpoints if home else (),
                       by_cluster={}, placements=(), leaving=())


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
        gpu_memory_mib=flavor.gpu_model.memory_mib,
    )


def load_catalog() -> dict[str, Any]:
    """The platform-wide catalog (`render_context`): flavors, cohorts, priority classes, node pools, and each
    host cluster's own catalog. What comes from the catalog's tables is built once per process and reused
    while their database-kept token stays the same (scheduling.catalog.revision): one query per event
    instead of six. The clusters are read every time (their status columns change on every apply)."""
    from django.db import connection

    from scheduling.clusters.models import Cluster

    token = catalog_revision.current(connection)
    carried = _catalog_settings()
    key = (str(connection.settings_dict.get("NAME")), token, *carried.items())
    built = _CATALOG.get(key) if token is not None else None
    if built is None:
        built = _build_catalog(carried)
        _CATALOG.clear()  # the last catalog only: an older token never comes back
        if token is not None:
            _CATALOG[key] = built
    global_catalog, flavors, pools, offers = built
    clusters = list(Cluster.objects.all())
    return context.entries(global_catalog, load_clusters(global_catalog, flavors, pools, clusters, offers))


# (database, token, settings) -> what `_build_catalog` returned for them: the last catalog built in this process.
_CATALOG: dict[tuple[object, ...], tuple[Catalog, dict[int, FlavorSpec], list[Any], list[tuple[int, int, int]]]] = {}


def _catalog_settings() -> dict[str, Any]:
    """The settings the catalog carries (Catalog's fields): part of the cache's key, since tests and operators
    may change them."""
    return {
        "default_cohort": conf.DEFAULT_COHORT,
        "topology_name": conf.TOPOLOGY_NAME,
        "topology_levels": tuple(conf.TOPOLOGY_LEVELS),
        "metrics_url": conf.METRICS_URL,
        "business_timezone": conf.BUSINESS_TIMEZONE,
        "node_class_group": conf.KARPENTER_NODE_CLASS_GROUP,
        "node_class_kind": conf.KARPENTER_NODE_CLASS_KIND,
        "fair_sharing": conf.KUEUE_FAIR_SHARING,
        "vllm_image": conf.VLLM_IMAGE or Catalog.vllm_image,
        "cpu_instance_types": tuple(conf.CPU_POOL_INSTANCE_TYPES),
        "cpu_node_class": conf.CPU_POOL_NODE_CLASS,
        "cpu_pool_limit": conf.CPU_POOL_CPU_LIMIT,
        "monitoring_namespace": conf.MONITORING_NAMESPACE,
        "prometheus_operator": conf.PROMETHEUS_OPERATOR,
        "model_hub_fqdns": tuple(conf.MODEL_HUB_FQDNS),
        "openbao_addr": conf.OPENBAO_ADDR,
        "openbao_mount": conf.OPENBAO_MOUNT,
        "openbao_kubernetes_auth": conf.OPENBAO_KUBERNETES_AUTH,
    }


def _build_catalog(carried: dict[str, Any]) -> tuple[Catalog, dict[int, FlavorSpec], list[Any],
                                                    list[tuple[int, int, int]]]:
    """Read the catalog's tables (`catalog_revision.TABLES`; the token is read before, so what is built here
    is at least as new as the token it is kept under)."""
    from scheduling.clusters.models import ClusterFlavor

    from .models import Cohort, Flavor, GpuNodePool, PriorityClass

    flavors = {f.pk: flavor_spec(f) for f in Flavor.objects.select_related("gpu_model")}
    pools = list(GpuNodePool.objects.all())
    global_catalog = Catalog(
            flavors=tuple(flavors.values()),
            cohorts=tuple(
                CohortSpec(c.name, c.parent.name if c.parent else "", c.fair_sharing_weight)
                for c in Cohort.objects.select_related("parent")
            ),
            # Seeded by migration; the defaults stand in if the table was emptied since.
            priority_classes=tuple(PriorityClass.objects.values_list("name", "value", "description"))
            or tuple(PRIORITY_CLASSES),
            node_pools=tuple(pool_spec(p, flavors[p.flavor_id]) for p in pools),
            **carried,
        )
    offers = list(ClusterFlavor.objects.values_list("cluster_id", "flavor_id", "capacity"))
    return global_catalog, flavors, pools, offers


def pool_spec(p: Any, flavor: FlavorSpec) -> NodePoolSpec:
    return NodePoolSpec(p.name, flavor, list(p.instance_types), list(p.capacity_types), p.gpu_limit, p.node_class,
                        p.consolidation_policy, p.consolidate_after, p.gpus_per_node,
                        tuple(sorted(p.trust_levels or ())))


def load_clusters(global_catalog: Catalog, flavors: dict[int, FlavorSpec], pools: list[Any], clusters: list[Any],
                  offer_rows: list[tuple[int, int, int]]) -> tuple[ClusterSpec, ...]:
    """Every host cluster with its own catalog. A flavor is offered on a cluster that has a ClusterFlavor row
    for it; `default` also offers every flavor no cluster has a row for, and its capacity there is the fleet
    total minus the other clusters' (Flavor.capacity is the sum, kept in step by the actions) -- so an upgraded
    single-cluster installation renders exactly what it did."""
    from scheduling.clusters.models import DEFAULT_CLUSTER

    if not clusters:  # a flushed database (tests): everything is on `default`
        return (ClusterSpec(DEFAULT_CLUSTER, f"clusters/{DEFAULT_CLUSTER}", catalog=global_catalog),)
    offers: dict[int, dict[int, int]] = {}
    for cluster_id, flavor_id, capacity in offer_rows:
        offers.setdefault(cluster_id, {})[flavor_id] = capacity
    default_id = next((c.pk for c in clusters if c.name == DEFAULT_CLUSTER), None)
    elsewhere: dict[int, int] = {}
    for cluster_id, offered in offers.items():
        if cluster_id != default_id:
            for flavor_id, capacity in offered.items():
                elsewhere[flavor_id] = elsewhere.get(flavor_id, 0) + capacity
    offered_anywhere = {flavor_id for offered in offers.values() for flavor_id in offered}
    specs = []
    for cluster in clusters:
        if cluster.pk == default_id:
            here = {pk: replace(f, capacity=max(0, f.capacity - elsewhere.get(pk, 0))) for pk, f in flavors.items()
                    if pk in offers.get(cluster.pk, {}) or pk not in offered_anywhere}
        else:
            here = {pk: replace(flavors[pk], capacity=capacity) for pk, capacity in offers.get(cluster.pk, {}).items()
                    if pk in flavors}
        ordered = tuple(here[pk] for pk in flavors if pk in here)
        cat = replace(global_catalog, flavors=ordered, node_pools=tuple(
            pool_spec(p, here.get(p.flavor_id, flavors[p.flavor_id])) for p in pools if p.cluster_id == cluster.pk))
        specs.append(ClusterSpec(cluster.name, cluster.tree, cluster.purpose, cluster.region,
                                 tuple(cluster.trust_levels or ()), cat))
    return tuple(specs)


def scheduling_of(view: Any) -> TenantScheduling | None:
    """A TenantView's scheduling inputs (its `scheduling` field, this app's `view_loader`), typed: tenants
    only knows the field as opaque."""
    sched = view.scheduling
    return sched if isinstance(sched, TenantScheduling) else None


def load_tenant(tenant: Any) -> dict[str, TenantScheduling]:
    """One tenant's scheduling inputs, a constant number of queries whatever the number of quotas or
    endpoints (three of ours plus the isolation policy's). The registered loader is the batch one
    (inputs_many.scheduling_many); tests/gitops/test_fleet.py checks it gives what this gives."""
    from scheduling.clusters.models import Placement

    from .models import InferenceEndpoint, Quota
    from .models import TenantScheduling as Settings
    from .policy import allowed_modes

    row = Settings.objects.select_related("cohort", "priority_class").filter(tenant_id=tenant.pk).first()
    by_cluster: dict[str, dict[str, QuotaSpec]] = {}
    for cluster, name, nominal, borrowing, lending in Quota.objects.filter(tenant_id=tenant.pk).order_by(
        "cluster__name", "flavor__name"
    ).values_list("cluster__name", "flavor__name", "nominal", "borrowing_limit", "lending_limit"):
        by_cluster.setdefault(cluster, {})[name] = QuotaSpec(nominal, borrowing, lending)
    endpoints = tuple(
        endpoint_spec(e)
        for e in InferenceEndpoint.objects.filter(tenant_id=tenant.pk).select_related("tier").order_by("name")
    )
    rows = Placement.objects.filter(tenant_id=tenant.pk).values_list("cluster__name", "home", "conditions")
    placements, leaving = placement_rows(rows)
    return {"scheduling": tenant_scheduling(row, frozenset(allowed_modes(tenant)), by_cluster, endpoints,
                                            placements, leaving)}


def placement_rows(rows: Any) -> tuple[tuple[tuple[str, bool], ...], tuple[str, ...]]:
    """((cluster, home) pairs, home first then by name, clusters being left); none recorded: home on
    `default`. A placement being removed carries the `Removing` condition (scheduling.clusters.placement_actions)."""
    from scheduling.clusters.models import DEFAULT_CLUSTER

    active, leaving = [], []
    for cluster, home, conditions in rows:
        if any(c.get("type") == "Removing" for c in conditions or ()):
            leaving.append(cluster)
        else:
            active.append((cluster, bool(home)))
    placed = tuple(sorted(active, key=lambda p: (not p[1], p[0]))) or ((DEFAULT_CLUSTER, True),)
    return placed, tuple(sorted(leaving))


def endpoint_spec(e: Any) -> EndpointSpec:
    """An InferenceEndpoint row (its `tier` selected with it) as render input."""
    return EndpointSpec(
        e.name, e.model, e.deployment, e.tier.name, e.tier.min_replicas, e.tier.max_replicas,
        e.tier.cooldown_seconds, e.tier.polling_seconds, e.tier.prewarm_start, e.tier.prewarm_end,
        e.tier.prewarm_replicas, e.queue_target, e.kv_cache_target, e.gated,
    )


def tenant_scheduling(row: Any, modes: frozenset[str], by_cluster: dict[str, dict[str, QuotaSpec]],
                      endpoints: tuple[EndpointSpec, ...],
                      placements: tuple[tuple[str, bool], ...], leaving: tuple[str, ...] = ()) -> TenantScheduling:
    """A tenant's render input from its TenantScheduling row (None: the platform defaults) and the rest."""
    home = next((name for name, is_home in placements if is_home), "")
    quotas = by_cluster.get(home, {})
    return TenantScheduling(
        allowed_modes=modes,
        cohort=(row.cohort.name if row and row.cohort else conf.DEFAULT_COHORT),
        weight=row.fair_sharing_weight if row else Decimal(1),
        priority_class=(row.priority_class.name if row and row.priority_class else DEFAULT_PRIORITY_CLASS),
        quotas=quotas,
        endpoints=endpoints,
        by_cluster=by_cluster,
        placements=placements,
        leaving=leaving,
    )
