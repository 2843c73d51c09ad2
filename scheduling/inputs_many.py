"""Batch versions of the per-tenant render loaders, for fleet-wide passes (tenants.fleet).

`scheduling.inputs.load_tenant` and `tenants.isolation.config.tenant_extras` read a few rows per
tenant: called for a thousand tenants that is thousands of queries, most of a no-op reconcile.
These load the same rows for many tenants at once (one query per table) and build the very same
values from them, reusing the loaders' own pure pieces. `tests/gitops/test_fleet.py` checks that
each returns exactly what its per-tenant loader returns, and that the rendered YAML is identical,
so a change to a loader that is not mirrored here fails CI instead of flip-flopping files.
"""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal
from typing import Any

from django.conf import settings

from tenants import reconcile
from tenants.isolation import config as isolation_config
from tenants.isolation import policy as isolation_policy
from tenants.isolation.models import AllocationPolicy, TenantIsolation

from . import inputs
from .defaults import DEFAULT_PRIORITY_CLASS


def _isolation_rows(tenants: list[Any]) -> tuple[dict[str, Any], dict[int, Any]]:
    levels = {row.trust_level: row for row in AllocationPolicy.objects.all()}
    isolation = {row.tenant_id: row for row in TenantIsolation.objects.filter(tenant_id__in=[t.pk for t in tenants])}
    return levels, isolation


def _allowed_modes(tenant: Any, levels: dict[str, Any], isolation: dict[int, Any]) -> frozenset[str]:
    level = levels.get(tenant.trust_level)
    base = (frozenset(level.allowed_modes) if level is not None
            else isolation_policy.DEFAULT_MODES.get(tenant.trust_level, frozenset()))
    iso = isolation.get(tenant.pk)
    return frozenset(isolation_policy.effective_modes(base, iso.allowed_modes if iso else None))


def isolation_many(tenants: list[Any]) -> dict[int, dict[str, Any]]:
    levels, isolation = _isolation_rows(tenants)
    out = {}
    for tenant in tenants:
        iso = isolation.get(tenant.pk)
        level = levels.get(tenant.trust_level)
        world = (level.world_egress if level is not None
                 else isolation_policy.DEFAULT_WORLD_EGRESS.get(tenant.trust_level, False))
        out[tenant.pk] = {
            "isolation": isolation_config.TenantIsolationView(
                allowed_modes=_allowed_modes(tenant, levels, isolation),
                world_egress=world,
                egress_cidrs=tuple(iso.egress_cidrs) if iso else (),
                egress_fqdns=tuple(iso.egress_fqdns) if iso else (),
                placement=isolation_policy.placement(tenant.trust_level, tenant.slug),
            )
        }
    return out


def scheduling_many(tenants: list[Any]) -> dict[int, dict[str, Any]]:
    from .models import InferenceEndpoint, Quota
    from .models import TenantScheduling as Settings

    ids = [t.pk for t in tenants]
    settings_rows = Settings.objects.select_related("cohort", "priority_class").filter(tenant_id__in=ids)
    rows = {r.tenant_id: r for r in settings_rows}
    quotas: dict[int, dict[str, inputs.QuotaSpec]] = defaultdict(dict)
    # Same order as the per-tenant query (the model's ordering: flavor name within a tenant).
    for tenant_id, name, nominal, borrowing, lending in (
        Quota.objects.filter(tenant_id__in=ids)
        .order_by("tenant__slug", "flavor__name")
        .values_list("tenant_id", "flavor__name", "nominal", "borrowing_limit", "lending_limit")
    ):
        quotas[tenant_id][name] = inputs.QuotaSpec(nominal, borrowing, lending)
    endpoints: dict[int, list[inputs.EndpointSpec]] = defaultdict(list)
    for e in InferenceEndpoint.objects.filter(tenant_id__in=ids).select_related("tier").order_by("tenant_id", "name"):
        endpoints[e.tenant_id].append(inputs.EndpointSpec(
            e.name, e.model, e.deployment, e.tier.name, e.tier.min_replicas, e.tier.max_replicas,
            e.tier.cooldown_seconds, e.tier.polling_seconds, e.tier.prewarm_start, e.tier.prewarm_end,
            e.tier.prewarm_replicas, e.queue_target, e.kv_cache_target,
        ))
    levels, isolation = _isolation_rows(tenants)
    out = {}
    for tenant in tenants:
        row = rows.get(tenant.pk)
        out[tenant.pk] = {
            "scheduling": inputs.TenantScheduling(
                allowed_modes=_allowed_modes(tenant, levels, isolation),
                cohort=(row.cohort.name if row and row.cohort else settings.GPUFLEET_DEFAULT_COHORT),
                weight=row.fair_sharing_weight if row else Decimal(1),
                priority_class=(row.priority_class.name if row and row.priority_class else DEFAULT_PRIORITY_CLASS),
                quotas=quotas.get(tenant.pk, {}),
                endpoints=tuple(endpoints.get(tenant.pk, ())),
            )
        }
    return out


def register() -> None:
    reconcile.VIEW_EXTRAS_MANY[inputs.load_tenant] = scheduling_many
    reconcile.VIEW_EXTRAS_MANY[isolation_config.tenant_extras] = isolation_many
