"""The scheduling app's view loader (the registry's `view_loader` of TenantView.scheduling), batch-first.

`scheduling.inputs.load_tenant` reads a few rows per tenant: called for a thousand tenants that is
thousands of queries, most of a no-op reconcile. This loads the same rows for many tenants at once (one
query per table) and builds the very same values from them, reusing the loader's own pure pieces; a
single reconcile is a batch of one. `tests/gitops/test_fleet.py` checks that a batch of many returns
exactly what batches of one and `load_tenant` return, and that the rendered YAML is identical.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from tenants.isolation import config as isolation_config
from tenants.reconcile import ids_in

from . import inputs


def scheduling_many(tenants: list[Any]) -> dict[int, inputs.TenantScheduling]:
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
    # The allowed modes: isolation's own batch loader, whose result `tenant_views` built already for
    # TenantView.isolation (`reconcile.shared_rows`).
    isolation = isolation_config.views_many(tenants)
    return {
        tenant.pk: inputs.tenant_scheduling(
            rows.get(tenant.pk), frozenset(isolation[tenant.pk].allowed_modes),
            quotas.get(tenant.pk, {}), tuple(endpoints.get(tenant.pk, ())),
            *inputs.placement_rows(placed.get(tenant.pk, ())),
        )
        for tenant in tenants
    }
