"""Desired state of one tenant, as plain manifests. Pure: no I/O, no clock, no randomness.

The same rows in give byte-identical YAML out (see infra.manifests.to_yaml). Other apps add their
per-tenant objects (quotas, queues, policies), inputs and hooks through the contributor registry
(gpufleet.core.registry: `tenant_section`, `render_context`, `vcluster_values`...); this app's own
sections are declared in tenants.contributions like theirs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpufleet.core import conf, registry
from infra.manifests import Manifest, Owner, sort_manifests

from .models import Phase, Tenant


@dataclass(frozen=True)
class RenderContext:
    """Platform-wide inputs to rendering, read from settings once per reconcile."""

    vcluster_chart_version: str = "0.36.1"
    vcluster_chart_repo: str = "https://charts.loft.sh"
    flux_namespace: str = "flux-system"
    helm_repository: str = "loft"
    # A syncer image that keeps host-side scheduling gates (vCluster v0.36.1 + loft-sh/vcluster#4107),
    # "registry/repository:tag". Empty: the chart's own image (see docs/isolation.md, defect 1).
    vcluster_syncer_image: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_settings(cls, *, tenants_only: bool = False) -> RenderContext:
        """`tenants_only`: without the inputs only the platform's own objects read (`platform_render_context`):
        what one tenant's reconcile needs. `with_platform_inputs` completes such a context."""
        extra: dict[str, Any] = {}
        for contribute in registry.functions("render_context"):  # other apps' platform-wide inputs (the catalog)
            extra.update(contribute())
        if tenants_only:
            extra[_TENANTS_ONLY] = True
        else:
            for contribute in registry.functions("platform_render_context"):
                extra.update(contribute())
        return cls(
            vcluster_chart_version=conf.VCLUSTER_CHART_VERSION,
            vcluster_chart_repo=conf.VCLUSTER_CHART_REPO,
            flux_namespace=conf.FLUX_NAMESPACE,
            vcluster_syncer_image=conf.VCLUSTER_SYNCER_IMAGE,
            extra=extra,
        )


# Registry points `render_context` (platform-wide render inputs, read at the edge once per reconcile so
# sections stay pure) and `platform_render_context`: inputs that only the platform's objects read (their keys
# start with "_", so the fleet pass's memo key leaves them out): fleetops' capacity rules list every tenant's
# ClusterQueue, i.e. read every quota of the fleet (40,000 rows at 10,000 tenants), which one tenant's
# reconcile must not pay for.

# Marks a context built `tenants_only` (copied into the per-cluster contexts derived from it).
_TENANTS_ONLY = "_tenants_only"


def with_platform_inputs(ctx: RenderContext) -> RenderContext:
    """`ctx` with the platform-only inputs loaded (itself if it has them). The derived per-cluster contexts a
    `tenants_only` context may have cached ("_" keys) are dropped: they would lack those inputs."""
    if not ctx.extra.get(_TENANTS_ONLY):
        return ctx
    from dataclasses import replace

    extra = {k: v for k, v in ctx.extra.items() if not k.startswith("_")}
    for contribute in registry.functions("platform_render_context"):
        extra.update(contribute())
    return replace(ctx, extra=extra)


@dataclass(frozen=True)
class TenantView:
    """What rendering needs from a tenant row (and nothing it could mutate).

    The fields after `generation` are filled by the registry's `view_loader` contributions (each names its
    field) and by the placement contributor, which narrows a view to one host cluster. Their types belong to
    the apps that fill them (tenants does not import scheduling): here they are opaque, and each app reads its
    own through a typed accessor (e.g. scheduling.render.sched_of)."""

    slug: str
    display_name: str
    trust_level: str
    phase: str
    generation: int
    # The tenant's isolation inputs (tenants.isolation.config.IsolationView); None: the safe defaults.
    isolation: Any = None
    # The tenant's scheduling inputs (scheduling.inputs.TenantScheduling), on one cluster once placed.
    scheduling: Any = None
    # The host cluster this view is narrowed to ('' = not narrowed) and whether it is the tenant's home.
    cluster: str = ""
    home: bool = True
    # MultiKueue's role of this placement (scheduling.clusters.multikueue_render.Dispatch); None: the mode is off.
    dispatch: Any = None

    @classmethod
    def of(cls, tenant: Tenant, **loaded: Any) -> TenantView:
        """`loaded`: the `view_loader` values by field name."""
        return cls(
            slug=tenant.slug,
            display_name=tenant.display_name,
            trust_level=tenant.trust_level,
            phase=tenant.phase,
            generation=tenant.generation,
            **loaded,
        )

    def of_row(self, tenant: Tenant) -> bool:
        """Was this view made from the tenant's row as it is now (a spec change bumps `generation`)?"""
        return (self.slug, self.display_name, self.trust_level, self.phase, self.generation) == (
            tenant.slug, tenant.display_name, tenant.trust_level, tenant.phase, tenant.generation)

    @property
    def namespace(self) -> str:
        return f"tenant-{self.slug}"

    @property
    def owner(self) -> Owner:
        return Owner("tenant", self.slug)

    @property
    def suspended(self) -> bool:
        return self.phase == Phase.SUSPENDED


Section = Callable[[TenantView, RenderContext], list[Manifest]]
PlatformSection = Callable[[RenderContext], list[Manifest]]


def metadata(view: TenantView, name: str, *, namespaced: bool = True, **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespaced:
        meta["namespace"] = view.namespace
    meta["labels"] = {**view.owner.labels, **labels}
    return meta


def platform_metadata(name: str, namespace: str | None = None, **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = {**Owner("platform").labels, **labels}
    return meta


# --- the foundation's sections -------------------------------------------------------------------

# Pod Security admission for the tenant's host namespace. vCluster syncs tenant pods here, so this
# is the policy that bounds what a tenant's pods may do on real nodes, whatever RBAC says inside.
POD_SECURITY = {
    "untrusted": "restricted",
    "standard": "baseline",
    "trusted": "baseline",
}

# Backstop object counts for the host namespace. GPU quota is Kueue's job (fair share, borrowing);
# the GPU keys added by `quota_hard` contributions only cap what a pod that escaped Kueue could take.
QUOTA_HARD = {
    "pods": "500",
    "services": "100",
    "services.loadbalancers": "0",
    "services.nodeports": "0",
    "persistentvolumeclaims": "100",
    "requests.storage": "10Ti",
}
GPU_RESOURCES_WHEN_SUSPENDED = ("requests.nvidia.com/gpu",)

# Registry points `quota_hard` (keys added to the backstop ResourceQuota: the scheduling app adds the
# tenant's GPU keys) and `namespace_labels` (the isolation app scopes HAMi's webhook). Pure, like sections.


def render_namespace(view: TenantView, ctx: RenderContext) -> list[Manifest]:
    level = POD_SECURITY[view.trust_level]
    extra_labels: dict[str, str] = {}
    for hook in registry.functions("namespace_labels"):
        extra_labels.update(hook(view, ctx))
    ns = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": metadata(
            view,
            view.namespace,
            namespaced=False,
            **{
                "gpufleet.io/trust-level": view.trust_level,
                "pod-security.kubernetes.io/enforce": level,
                "pod-security.kubernetes.io/enforce-version": "latest",
                "pod-security.kubernetes.io/warn": "restricted",
                "pod-security.kubernetes.io/audit": "restricted",
                **extra_labels,
            },
        ),
    }
    ns["metadata"]["annotations"] = {
        "gpufleet.io/display-name": view.display_name,
        "gpufleet.io/suspended": "true" if view.suspended else "false",
    }
    return [ns]


def render_quota(view: TenantView, ctx: RenderContext) -> list[Manifest]:
    hard = dict(QUOTA_HARD)
    gpu_keys: dict[str, str] = {}
    for hook in registry.functions("quota_hard"):
        gpu_keys.update(hook(view, ctx))
    hard.update(gpu_keys)
    if view.suspended:
        # Suspension stops admitting GPU work without touching the control plane.
        hard.update(dict.fromkeys((*GPU_RESOURCES_WHEN_SUSPENDED, *gpu_keys), "0"))
    return [
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": metadata(view, "gpufleet-backstop"),
            "spec": {"hard": dict(sorted(hard.items()))},
        }
    ]


# Container defaults for pods that say nothing. Only requests are defaulted, so the scheduler and
# Kueue count something for them; no default limit (a 1Gi default memory limit OOM-killed every vLLM
# pod that did not set one) and no maximum (a 64-CPU cap rejected whole-node training pods, and a
# LimitRange `max` also rejects every container that sets no limit). What bounds a big pod is its
# node and, for GPU pods, the ClusterQueue's cpu/memory quota.
LIMIT_RANGE_DEFAULT_REQUEST = {"cpu": "100m", "memory": "256Mi"}


def render_limit_range(view: TenantView, ctx: RenderContext) -> list[Manifest]:
    return [
        {
            "apiVersion": "v1",
            "kind": "LimitRange",
            "metadata": metadata(view, "gpufleet-defaults"),
            "spec": {"limits": [{"type": "Container", "defaultRequest": dict(LIMIT_RANGE_DEFAULT_REQUEST)}]},
        }
    ]


# Pod Security `restricted` for the vCluster's own pod (the chart runs it as root without seccomp):
# non-root, no privilege escalation, every capability dropped, RuntimeDefault seccomp. The UID is the
# one vCluster's docs use for non-root control planes; runAsUser must be set explicitly because Helm
# merges our values over the chart default `runAsUser: 0`.
NON_ROOT_UID = 12345
RESTRICTED_CONTAINER = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "runAsUser": NON_ROOT_UID,
    "runAsGroup": NON_ROOT_UID,
    "seccompProfile": {"type": "RuntimeDefault"},
}
RESTRICTED_POD = {
    "runAsNonRoot": True,
    "runAsUser": NON_ROOT_UID,
    "runAsGroup": NON_ROOT_UID,
    "fsGroup": NON_ROOT_UID,
    "seccompProfile": {"type": "RuntimeDefault"},
}


CORE_DNS_POD = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}


def image_ref(ref: str) -> dict[str, str]:
    """"registry/repository:tag" as the chart's image object."""
    name, tag = (ref.rsplit(":", 1) if ":" in ref.rsplit("/", 1)[-1] else (ref, ""))
    registry, _, repository = name.partition("/")
    return {"registry": registry, "repository": repository, "tag": tag}


def vcluster_values(view: TenantView, ctx: RenderContext) -> dict[str, Any]:
    """vcluster.yaml for the tenant (validated against the chart's values.schema.json)."""
    values: dict[str, Any] = {
        "controlPlane": {
            "distro": {"k8s": {"enabled": True}},
            "statefulSet": {
                "resources": {
                    "requests": {"cpu": "200m", "memory": "512Mi"},
                    "limits": {"memory": "2Gi"},
                },
                "labels": dict(view.owner.labels),
            },
        },
        "sync": {"toHost": {"pods": {"enabled": True}}},
        # KAI Scheduler needs synced pods without owner references (upstream integration guide).
        "experimental": {"syncSettings": {"setOwner": False}},
    }
    if POD_SECURITY[view.trust_level] == "restricted":
        values["controlPlane"]["statefulSet"]["security"] = {
            "podSecurityContext": dict(RESTRICTED_POD),
            "containerSecurityContext": dict(RESTRICTED_CONTAINER),
        }
        values["controlPlane"]["distro"]["k8s"]["securityContext"] = dict(RESTRICTED_CONTAINER)
        # The virtual cluster's CoreDNS is synced to this namespace like any tenant pod. vCluster's CoreDNS
        # template gives its pod a securityContext only from `controlPlane.coredns.security.podSecurityContext`,
        # else (RuntimeDefault seccomp) only when `policies.podSecurityStandard` is set
        # (loft-sh/vcluster@v0.36.1:pkg/coredns/template.go:223-231); the chart sets neither, so `restricted`
        # refused it and the tenant had no DNS (issue 26, B4). The template's container default already is
        # non-root, no escalation, drop ALL + NET_BIND_SERVICE (template.go:255-268).
        values["controlPlane"]["coredns"] = {"security": {"podSecurityContext": dict(CORE_DNS_POD)}}
    if ctx.vcluster_syncer_image:
        values["controlPlane"]["statefulSet"]["image"] = image_ref(ctx.vcluster_syncer_image)
    # Registry point `vcluster_values`: pure functions adding to the values in place (e.g. tenants.isolation:
    # OIDC, in-cluster RBAC, placement).
    for hook in registry.functions("vcluster_values"):
        hook(view, ctx, values)
    return values


def render_vcluster(view: TenantView, ctx: RenderContext) -> list[Manifest]:
    # Every placement runs a vCluster: it is how the tenant's kubectl reaches that cluster at all. vCluster
    # v0.36.1 syncs pods, not Jobs, to the host (chart values.schema.json SyncToHost), so work created on the
    # home vCluster never reaches another cluster's queue; a vCluster there syncs its pods into that
    # cluster's tenant namespace, where its LocalQueue `gpu` and its quota on that cluster apply.
    return [
        {
            "apiVersion": "helm.toolkit.fluxcd.io/v2",
            "kind": "HelmRelease",
            "metadata": metadata(view, "vcluster"),
            "spec": {
                "interval": "10m",
                "releaseName": "vcluster",
                "targetNamespace": view.namespace,
                "chart": {
                    "spec": {
                        "chart": "vcluster",
                        "version": ctx.vcluster_chart_version,
                        "sourceRef": {
                            "kind": "HelmRepository",
                            "name": ctx.helm_repository,
                            "namespace": ctx.flux_namespace,
                        },
                        "interval": "1h",
                    }
                },
                "install": {"remediation": {"retries": 3}},
                "upgrade": {"remediation": {"retries": 3, "remediateLastFailure": True}},
                "values": vcluster_values(view, ctx),
            },
        }
    ]


def render_helm_repositories(ctx: RenderContext) -> list[Manifest]:
    return [
        {
            "apiVersion": "source.toolkit.fluxcd.io/v1",
            "kind": "HelmRepository",
            "metadata": platform_metadata(ctx.helm_repository, ctx.flux_namespace),
            "spec": {"interval": "1h", "url": ctx.vcluster_chart_repo},
        }
    ]


def render_tenant(view: TenantView, ctx: RenderContext) -> list[Manifest]:
    """Everything the tenant owns, in apply order. Empty once the tenant is being torn down."""
    if view.phase in (Phase.DEPROVISIONING, Phase.DELETED, Phase.REQUESTED, Phase.REJECTED):
        return []
    manifests: list[Manifest] = []
    for section in registry.functions("tenant_section"):
        manifests.extend(section(view, ctx))
    return sort_manifests(manifests)


# --- where it goes: host clusters ------------------------------------------------------------------


@dataclass(frozen=True)
class Placed:
    """One host cluster a tenant (or the platform) is delivered to, with the render inputs for that cluster:
    `view` and `ctx` narrowed to it (its flavors, node pools, the tenant's quotas there). `tree` is the cluster's
    folder in the GitOps repository and the owner prefix ('' = the root layout of an installation from before
    clusters). A `refused` placement (the cluster does not admit the tenant's trust level) gets nothing."""

    cluster: str
    tree: str
    view: TenantView | None
    ctx: RenderContext
    home: bool = True
    refused: str = ""

    def owner(self, local: str) -> str:
        """'tenant:<slug>' or 'platform' with this cluster's prefix."""
        return f"{self.tree}/{local}" if self.tree else local


# The scheduling app (which owns clusters and placements) contributes one function each to the registry's
# `placements` ((view, ctx) -> the tenant's placements) and `platform_targets` ((ctx) -> every cluster, for the
# platform's objects), and MultiKueue a `placement_wrappers` entry around the first. Without them there is one
# cluster and the root layout.


def _single_cluster(view: TenantView, ctx: RenderContext) -> list[Placed]:
    return [Placed("", "", view, ctx)]


def placements(view: TenantView, ctx: RenderContext) -> list[Placed]:
    """Home first. A tenant that is going away keeps its placements (the teardown prunes on each)."""
    placed = registry.one("placements") or _single_cluster
    for wrap in registry.functions("placement_wrappers"):
        placed = wrap(placed)
    return placed(view, ctx)  # type: ignore[no-any-return]


def platform_targets(ctx: RenderContext) -> list[Placed]:
    targets = registry.one("platform_targets")
    if targets is not None:
        return targets(ctx)  # type: ignore[no-any-return]
    return [Placed("", "", None, ctx)]


def render_placed(view: TenantView, ctx: RenderContext) -> list[tuple[Placed, list[Manifest]]]:
    """The tenant's objects per host cluster (a refused placement: none, so its objects there are pruned)."""
    return [(p, [] if p.refused else render_tenant(p.view or view, p.ctx)) for p in placements(view, ctx)]


def placed_digest(rendered: list[tuple[Placed, list[Manifest]]]) -> str:
    """What `applied_digest` records. One placement: the digest of its objects, exactly as before clusters
    (an upgraded installation re-renders nothing); several: the trees are part of what was applied."""
    from infra.manifests import digest

    if len(rendered) == 1:
        return digest(rendered[0][1])
    import hashlib

    parts = "\n".join(f"{p.tree}:{p.home}:{digest(ms)}" for p, ms in rendered)
    return hashlib.sha256(parts.encode()).hexdigest()


def render_platform(ctx: RenderContext) -> list[Manifest]:
    if ctx.extra.get(_TENANTS_ONLY):  # its platform-only inputs are missing: objects would be pruned
        raise ValueError("render_platform needs a context with the platform's inputs (with_platform_inputs)")
    manifests: list[Manifest] = []
    for section in registry.functions("platform_section"):
        manifests.extend(section(ctx))
    return sort_manifests(manifests)
