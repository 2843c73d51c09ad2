"""Inputs of isolation rendering, read at the edge (settings, DB) so the render functions stay pure.

`settings_extras` feeds RenderContext.extra["isolation"] (platform-wide), `views_many` (the registry's
`view_loader` of TenantView.isolation) each tenant's. Without them (a bare TenantView in a test or a preview),
rendering falls back to the trust level's defaults: the strictest reading of the data it lacks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from gpufleet.core import conf

from . import policy


@dataclass(frozen=True)
class IsolationSettings:
    # Empty: no issuer configured; the vCluster then gets no OIDC flags and no kubeconfig is issued.
    oidc_issuer: str = ""
    oidc_client_id: str = "gpufleet-vcluster"
    oidc_username_claim: str = "preferred_username"
    oidc_groups_claim: str = "groups"
    # Prefixes keep OIDC identities apart from the virtual cluster's own users and system groups.
    oidc_username_prefix: str = "oidc:"
    oidc_groups_prefix: str = "oidc:"
    # Group name per tenant role, as the IdP sends it: gpufleet:<slug>:<role>.
    group_template: str = "gpufleet:{slug}:{role}"
    server_url_template: str = "https://{slug}.vcluster.example.com"
    ingress_namespace: str = "ingress-nginx"
    ingress_labels: tuple[tuple[str, str], ...] = (("app.kubernetes.io/name", "ingress-nginx"),)
    metadata_cidrs: tuple[str, ...] = ("169.254.169.254/32", "fd00:ec2::254/128")
    # The platform's metrics scraper (VictoriaMetrics/Prometheus): KEDA and billing read what it scrapes.
    monitoring_namespace: str = "monitoring"
    # The ClusterSecretStore External Secrets reads the platform-issued vCluster serving CA through (OpenBao);
    # "" = the vCluster makes its own CA (no kubeconfig can carry it). vcluster.serving_ca_manifests.
    ca_store: str = ""

    def group(self, slug: str, role: str) -> str:
        return self.group_template.format(slug=slug, role=role)

    def server_url(self, slug: str, cluster: str = "") -> str:
        """The tenant's vCluster API on its home cluster (`cluster` empty) or on another placement: every
        placement runs a vCluster of its own, named `<slug>-<cluster>` in the template's `{slug}` (one DNS
        label, so a wildcard record for the template's domain routes it too)."""
        return self.server_url_template.format(slug=f"{slug}-{cluster}" if cluster else slug)

    def server_host(self, slug: str, cluster: str = "") -> str:
        """The kubeconfig server's host name: the Ingress host and a SAN of the vCluster certificate."""
        return urlsplit(self.server_url(slug, cluster)).hostname or ""

    @property
    def oidc_issuer_host_port(self) -> tuple[str, int] | None:
        """Host and port the virtual API server fetches the issuer's discovery document and keys from."""
        if not self.oidc_issuer:
            return None
        parts = urlsplit(self.oidc_issuer)
        if not parts.hostname:
            return None
        return parts.hostname, parts.port or (80 if parts.scheme == "http" else 443)


@dataclass(frozen=True)
class TenantIsolationView:
    allowed_modes: frozenset[str]
    world_egress: bool
    egress_cidrs: tuple[str, ...] = ()
    egress_fqdns: tuple[str, ...] = ()
    placement: policy.Placement = field(default_factory=lambda: policy.Placement({}, ()))

    @classmethod
    def defaults(cls, trust_level: str, slug: str) -> TenantIsolationView:
        return cls(
            allowed_modes=policy.DEFAULT_MODES.get(trust_level, frozenset()),
            world_egress=policy.DEFAULT_WORLD_EGRESS.get(trust_level, False),
            placement=policy.placement(trust_level, slug),
        )


def settings_from(django_settings: Any) -> IsolationSettings:
    base = IsolationSettings()
    labels = conf.INGRESS_LABELS or dict(base.ingress_labels)
    return IsolationSettings(
        oidc_issuer=conf.VCLUSTER_OIDC_ISSUER or getattr(django_settings, "OIDC_OP_ISSUER", None) or base.oidc_issuer,
        oidc_client_id=conf.VCLUSTER_OIDC_CLIENT_ID or base.oidc_client_id,
        oidc_username_claim=conf.OIDC_USERNAME_CLAIM or base.oidc_username_claim,
        oidc_groups_claim=conf.OIDC_GROUPS_CLAIM or base.oidc_groups_claim,
        server_url_template=conf.VCLUSTER_URL_TEMPLATE or base.server_url_template,
        ingress_namespace=conf.INGRESS_NAMESPACE or base.ingress_namespace,
        ingress_labels=tuple(sorted(labels.items())),
        monitoring_namespace=conf.MONITORING_NAMESPACE or base.monitoring_namespace,
        ca_store=conf.VCLUSTER_CA_STORE or "",
    )


def settings_extras() -> dict[str, Any]:
    from django.conf import settings

    return {"isolation": settings_from(settings)}


def tenant_extras(tenant: Any) -> dict[str, Any]:
    """Two queries: the trust level's policy row and the tenant's own isolation row (none if this reconcile
    read them already: `policy.level_row`)."""
    return {"isolation": isolation_view(tenant, policy.level_row(tenant.trust_level), policy.isolation_row(tenant.pk))}


def rows_many(tenants: Sequence[Any]) -> tuple[dict[str, Any], dict[int, Any]]:
    """The trust levels' policy rows and these tenants' isolation rows: read once per `tenant_views` call
    (`reconcile.shared_rows`), whichever loader asks first."""
    from ..reconcile import ids_in, shared_rows
    from .models import AllocationPolicy, TenantIsolation

    ids = tuple(t.pk for t in tenants)

    def load() -> tuple[dict[str, Any], dict[int, Any]]:
        levels = {row.trust_level: row for row in AllocationPolicy.objects.all()}
        return levels, {row.tenant_id: row for row in TenantIsolation.objects.filter(tenant_id__in=ids_in(list(ids)))}

    return shared_rows(("isolation_rows", ids), load)


def views_many(tenants: Sequence[Any]) -> dict[int, TenantIsolationView]:
    """The registry's `view_loader` of TenantView.isolation: each tenant's isolation view, built once per
    `tenant_views` call (scheduling's loader reads the allowed modes from it too). Two queries per batch."""
    from ..reconcile import shared_rows

    def build() -> dict[int, TenantIsolationView]:
        levels, isolation = rows_many(tenants)
        return {tenant.pk: isolation_view(tenant, levels.get(tenant.trust_level), isolation.get(tenant.pk))
                for tenant in tenants}

    return shared_rows(("isolation_views", tuple(t.pk for t in tenants)), build)


def isolation_view(tenant: Any, level: Any, iso: Any) -> TenantIsolationView:
    """Pure: the tenant's isolation from its trust level's AllocationPolicy row and its own TenantIsolation
    row (either may be None: the trust level's built-in defaults, no per-tenant narrowing)."""
    base = frozenset(level.allowed_modes) if level else policy.DEFAULT_MODES.get(tenant.trust_level, frozenset())
    world = level.world_egress if level else policy.DEFAULT_WORLD_EGRESS.get(tenant.trust_level, False)
    return TenantIsolationView(
        allowed_modes=policy.effective_modes(base, iso.allowed_modes if iso else None),
        world_egress=world,
        egress_cidrs=tuple(iso.egress_cidrs) if iso else (),
        egress_fqdns=tuple(iso.egress_fqdns) if iso else (),
        placement=policy.placement(tenant.trust_level, tenant.slug),
    )


def of_view(view: Any) -> TenantIsolationView:
    found = view.isolation
    return found if isinstance(found, TenantIsolationView) else TenantIsolationView.defaults(
        view.trust_level, view.slug
    )


def of_ctx(ctx: Any) -> IsolationSettings:
    found = ctx.extra.get("isolation")
    return found if isinstance(found, IsolationSettings) else IsolationSettings()
