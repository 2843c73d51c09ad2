"""The three-tenant fleet of issue 15, rendered by the product's own render functions (no database):
`acme` trusted (HAMi shares allowed), `beta` standard (MIG), `gamma` untrusted (whole GPUs on nodes of
its own). The journeys read only what this renders, so a rendering change changes the journeys."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from scheduling.catalog import default_weight
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


@dataclass
class Fleet:
    platform: list[dict[str, Any]]
    tenants: dict[str, list[dict[str, Any]]]
    # ResourceQuota `used` per namespace (what the cluster already runs), e.g. for the backstop journeys.
    used: dict[str, dict[str, float]] = field(default_factory=dict)
    # Scheduling installed in the cluster (the prerequisites: scheduling/prerequisites.py renders their HelmReleases).
    schedulers: tuple[str, ...] = ("default-scheduler", "kai-scheduler", "hami-scheduler")

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
                      extra={"scheduling": sched, "isolation": TenantIsolationView.defaults(level, name)})
    return replace(base, **changes) if changes else base


def context(**changes: Any) -> RenderContext:
    catalog = Catalog(flavors=FLAVORS, priority_classes=tuple(PRIORITY_CLASSES), node_pools=NODE_POOLS,
                      metrics_url="http://vmsingle.monitoring.svc:8428")
    ctx = RenderContext(extra={"scheduling": catalog, "isolation": IsolationSettings(
        oidc_issuer="https://login.gpufleet.test")})
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
