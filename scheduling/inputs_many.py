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
from typing import Any

from django.db.models.expressions import RawSQL

from tenants import reconcile
from tenants.isolation import config as isolation_config
from tenants.isolation.models import AllocationPolicy, TenantIsolation

from . import inputs


def ids_in(ids: list[int]) -> Any:
    """The right-hand side of `tenant_id__in` for many ids: ONE array parameter
    (`IN (SELECT unnest(%s::bigint[]))`): a list of 500 ids is 500 placeholders that Django prepares and
    psycopg splices one by one -- a fifth of a no-op pass at 10,000 tenants."""
    return RawSQL("SELECT unnest(%s::bigint[])", ["{" + ",".join(str(int(i)) for i in ids) + "}"])


def _isolation_rows(tenants: list[Any]) -> tuple[dict[str, Any], dict[int, Any]]:
    """Both loaders below read these: within one `tenant_views` call, once (`reconcile.shared_rows`)."""
    ids = tuple(t.pk for t in tenants)

    def load() -> tuple[dict[str, Any], dict[int, Any]]:
        levels = {row.trust_level: row for row in AllocationPolicy.objects.all()}
        return levels, {row.tenant_id: row for row in TenantIsolation.objects.filter(tenant_id__in=ids_in(list(ids)))}

    return reconcile.shared_rows(("isolation_rows", ids), load)


def _isolation_views(tenants: list[Any]) -> dict[int, Any]:
    """Each tenant's isolation view: both loaders below need it (scheduling for the allowed modes), built
    once per `tenant_views` call."""
    def build() -> dict[int, Any]:
        levels, isolation = _isolation_rows(tenants)
        return {tenant.pk: isolation_config.isolation_view(tenant, levels.get(tenant.trust_level),
                                                           isolation.get(tenant.pk)) for tenant in tenants}

    return reconcile.shared_rows(("isolation_views", tuple(t.pk for t in tenants)), build)


def isolation_many(tenants: list[Any]) -> dict[int, dict[str, Any]]:
    views = _isolation_views(tenants)
    return {tenant.pk: {"isolation": views[tenant.pk]} for tenant in tenants}


def scheduling_many(tenants: list[Any]) -> dict[int, dict[str, Any]]:
    from .models import InferenceEndpoint, Placement, Quota
    from .models import TenantScheduling as Settings

    ids = ids_in([t.pk for t in tenants])
    settings_rows = Settings.objects.select_related("cohort", "priority_class").filter(tenant_id__in=ids)
    rows = {r.tenant_id: r for r in settings_rows}
    quotas: dict[int, dict[str, dict[str, inputs.QuotaSpec]]] = defaultdict(dict)
    # Frozen values: tenants with the same numbers share one (a fleet has a handful of distinct quotas, and
    # building 40,000 frozen dataclasses was a tenth of loading the fleet's inputs).
    specs: dict[tuple[int, int | None, int | None], inputs.QuotaSpec] = {}
    # Same order as the per-tenant query (cluster, then flavor name within a tenant).
    for tenant_id, cluster, name, *numbers in (
        Quota.objects.filter(tenant_id__in=ids)
        .order_by("tenant_id", "cluster__name", "flavor__name")
        .values_list("tenant_id", "cluster__name", "flavor__name", "nominal", "borrowing_limit", "lending_limit")
    ):
        key = tuple(numbers)
        spec = specs.get(key)  # type: ignore[call-overload]
        if spec is None:
            spec = specs[key] = inputs.QuotaSpec(*numbers)  # type: ignore[index]
        quotas[tenant_id].setdefault(cluster, {})[name] = spec
    placed: dict[int, list[tuple[str, bool, list]]] = defaultdict(list)
    for tenant_id, cluster, home, conditions in Placement.objects.filter(tenant_id__in=ids).values_list(
            "tenant_id", "cluster__name", "home", "conditions"):
        placed[tenant_id].append((cluster, home, conditions))
    endpoints: dict[int, list[inputs.EndpointSpec]] = defaultdict(list)
    for e in InferenceEndpoint.objects.filter(tenant_id__in=ids).select_related("tier").order_by("tenant_id", "name"):
        endpoints[e.tenant_id].append(inputs.endpoint_spec(e))
    isolation = _isolation_views(tenants)
    return {
        tenant.pk: {"scheduling": inputs.tenant_scheduling(
            rows.get(tenant.pk), frozenset(isolation[tenant.pk].allowed_modes),
            quotas.get(tenant.pk, {}), tuple(endpoints.get(tenant.pk, ())),
            *inputs.placement_rows(placed.get(tenant.pk, ())),
        )}
        for tenant in tenants
    }


def register() -> None:
    reconcile.VIEW_EXTRAS_MANY[inputs.load_tenant] = scheduling_many
    reconcile.VIEW_EXTRAS_MANY[isolation_config.tenant_extras] = isolation_many
