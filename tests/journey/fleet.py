"""The three-tenant fleet of issue 15, rendered by the product's own render functions (no database):
`acme` trusted (HAMi shares allowed), `beta` standard (MIG), `gamma` untrusted (whole GPUs on nodes of
its own). The journeys read only what this renders, so a rendering change changes the journeys."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from typing import Any

from scheduling.catalog.rules import default_weight
from scheduling.defaults import PRIORITY_CLASSES
from scheduling.inputs import Catalog, FlavorSpec, NodePoolSpec, QuotaSpec, TenantScheduling
from tenants.isolation.config import IsolationSettings, TenantIsolationView
from tenants.render import RenderContext, TenantView, render_platform, render_tenant

PRODUCT = "NVIDIA-H100-80GB-HBM3"
TRUST = {"acme": "trusted", "beta": "standard", "gamma": "untrusted"}


def flavor(name: str, mode: str, capacity: int, mig: str = "", share: int | None = None) -> FlavorSpec:
    return FlavorSpec(name=name, gpu_model="h100-80gb", product_label=PRODUCT, mode=mode, mig_profile=mig,
                      memory_percent=share, cores_percent=share,
                      weight=default_weight(mode, mig, share, share), capacity=capacity,
                      node_labels={}, tolerations=[], taints=[])


FLAVORS = (
    flavor("h100", "whole", 16),
    flavor("h100-3g", "mig", 14, mig="3g.40gb"),
    flavor("h100-quarter", "hami", 32, share=25),
)
# One Karpenter pool per flavor (Karpenter defaults: on-demand, WhenEmpty after 1h), as an operator
# creates them with `gpufleet nodepool create`; untrusted tenants get dedicated copies (scheduling.nodepools).
NODE_POOLS = tuple(
    NodePoolSpec(name=f"pool-{f.name}", flavor=f, instance_types=["p5.48xlarge"], capacity_types=["on-demand"],
                 gpu_limit=16, node_class="gpu", consolidation_policy="WhenEmpty", consolidate_after="1h")
    for f in FLAVORS)
QUOTAS = {
    "acme": {"h100": QuotaSpec(2, 2), "h100-3g": QuotaSpec(2, 0), "h100-quarter": QuotaSpec(8, 0)},
    "beta": {"h100": QuotaSpec(2, 0), "h100-3g": QuotaSpec(7, 0)},
    "gamma": {"h100": QuotaSpec(4, 0)},
}
PRIORITY = {"acme": "high", "beta": "standard", "gamma": "low"}
# The remedy for loft-sh/vcluster#4106: a syncer built from v0.36.1 + PR #4107 (GPUFLEET_VCLUSTER_SYNCER_IMAGE).
PATCHED_SYNCER = "registry.example.com/loft-sh/vcluster-pro:0.36.1-gates"

# The settings the fleet is rendered with: the SHIPPED PRODUCTION DEFAULTS (platform/gpufleet/settings/base.py
# with no GPUFLEET_* variable set; test_shipped_defaults.py checks them against a clean process), by the name of
# the RenderContext/Catalog field each one sets.
SHIPPED = {
    "GPUFLEET_VCLUSTER_CHART_VERSION": ("vcluster_chart_version", "0.36.1"),
    "GPUFLEET_VCLUSTER_SYNCER_IMAGE": ("vcluster_syncer_image", ""),
    "GPUFLEET_TOPOLOGY_NAME": ("topology_name", "gpu-topology"),
    "GPUFLEET_TOPOLOGY_LEVELS": ("topology_levels", ()),
    "GPUFLEET_KUEUE_FAIR_SHARING": ("fair_sharing", False),
    "GPUFLEET_KARPENTER_NODE_CLASS_GROUP": ("node_class_group", "karpenter.k8s.aws"),
    "GPUFLEET_KARPENTER_NODE_CLASS_KIND": ("node_class_kind", "EC2NodeClass"),
    "GPUFLEET_CPU_POOL_INSTANCE_TYPES": ("cpu_instance_types", ("m7i.large", "m7i.xlarge", "m7i.2xlarge")),
    "GPUFLEET_CPU_POOL_NODE_CLASS": ("cpu_node_class", "default"),
    "GPUFLEET_CPU_POOL_CPU_LIMIT": ("cpu_pool_limit", 16),
}
# Each documented option, toggled one at a time (docs/compatibility.md, docs/scheduling.md).
OPTIONS: dict[str, dict[str, Any]] = {
    "patched-syncer": {"vcluster_syncer_image": PATCHED_SYNCER},
    "topology-levels": {"topology_levels": ("gpufleet.io/topology-block", "gpufleet.io/topology-rack",
                                            "kubernetes.io/hostname")},
    "fair-sharing": {"fair_sharing": True},
}
# A new cluster's nodes: the system node group the controllers run on (untainted, no GPU). GPU nodes come
# from Karpenter.
SYSTEM_NODE = {"apiVersion": "v1", "kind": "Node",
               "metadata": {"name": "system-0", "labels": {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                                                            "kubernetes.io/hostname": "system-0"}},
               "spec": {}, "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}}}


@dataclass
class Fleet:
    platform: list[dict[str, Any]]
    tenants: dict[str, list[dict[str, Any]]]
    # ResourceQuota `used` per namespace (what the cluster already runs), e.g. for the backstop journeys.
    used: dict[str, dict[str, float]] = field(default_factory=dict)
    # Scheduling installed in the cluster (the prerequisites: scheduling/prerequisites.py renders their HelmReleases).
    schedulers: tuple[str, ...] = ("default-scheduler", "kai-scheduler", "hami-scheduler")
    # Nodes that exist (kube-scheduler and Kueue TAS see only these; Karpenter adds the rest).
    nodes: list[dict[str, Any]] = field(default_factory=lambda: [copy.deepcopy(SYSTEM_NODE)])
    # AdmissionCheck names that delay TAS to after provisioning (ProvisioningRequest/MultiKueue).
    delaying_checks: tuple[str, ...] = ()

    @property
    def manifests(self) -> list[dict[str, Any]]:
        """Every rendered object: the platform's, then each tenant's."""
        return [*self.platform, *(m for ms in self.tenants.values() for m in ms)]

    def objects(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return [m for m in self.manifests if m["kind"] == kind
                and (namespace is None or m["metadata"].get("namespace") == namespace)]

    def one(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        return next((m for m in self.objects(kind, namespace) if m["metadata"]["name"] == name), None)

    def namespace(self, name: str) -> dict[str, Any]:
        found = self.one("Namespace", name)
        assert found is not None, f"no namespace {name}"
        return found

    def vcluster_values(self, namespace: str) -> dict[str, Any]:
        release = self.one("HelmRelease", "vcluster", namespace)
        assert release is not None, f"no vCluster in {namespace}"
        return release["spec"]["values"]


def view(slug: str, catalog: Catalog, name: str = "", **changes: Any) -> TenantView:
    """`slug` picks the tenant's role in the fleet; `name` (default: the slug) is what it is called."""
    level = TRUST[slug]
    name = name or slug
    sched = TenantScheduling(allowed_modes=None, cohort="gpufleet", priority_class=PRIORITY[slug],
                             quotas=QUOTAS[slug])
    base = TenantView(slug=name, display_name=name.title(), trust_level=level, phase="ready", generation=1,
                      scheduling=sched, isolation=TenantIsolationView.defaults(level, name))
    return replace(base, **changes) if changes else base


def context(**changes: Any) -> RenderContext:
    """The fleet's context at the shipped defaults, with `changes` (RenderContext or Catalog fields) applied."""
    values = {field_name: default for field_name, default in SHIPPED.values()}
    values.update(changes)
    catalog_fields = {k: v for k, v in values.items() if k in Catalog.__dataclass_fields__}
    catalog = Catalog(flavors=FLAVORS, priority_classes=tuple(PRIORITY_CLASSES), node_pools=NODE_POOLS,
                      metrics_url="http://vmsingle.monitoring.svc:8428", **catalog_fields)
    ctx = RenderContext(extra={"scheduling": catalog, "isolation": IsolationSettings(
        oidc_issuer="https://login.gpufleet.test")})
    changes = {k: v for k, v in values.items() if k not in Catalog.__dataclass_fields__}
    # Fields an older RenderContext lacks are dropped, so the journeys also run against the rendering
    # before issue 15's fixes (how each defect's journey was seen to fail).
    known = {k: v for k, v in changes.items() if hasattr(ctx, k)}
    return replace(ctx, **known) if known else ctx


def render_fleet(names: dict[str, str] | None = None, **ctx_changes: Any) -> Fleet:
    """The fleet; `names` renames tenants (e.g. throwaway names on a real cluster)."""
    ctx = context(**ctx_changes)
    catalog = ctx.extra["scheduling"]
    names = names or {}
    return Fleet(platform=render_platform(ctx),
                 tenants={slug: render_tenant(view(slug, catalog, names.get(slug, "")), ctx) for slug in TRUST})
