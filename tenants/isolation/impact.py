"""What a narrower GPU mode set breaks: configured workloads that would no longer be admitted.

Known here: the tenant's configured quotas (scheduling's Quota rows name a flavor with a mode).
Other apps add checks (the registry's `impact_check`). Running pods are only known to a live cluster: Kyverno's
background scan reports them (the Policy is rendered with `background: true`).
"""

from __future__ import annotations

from typing import Any

from django.apps import apps

from gpufleet import clock
from gpufleet.core import registry

from . import policy

CONDITION = "GpuModesAdmitted"
# Other apps' checks are the registry's `impact_check` contributions: (tenant, allowed modes) ->
# human-readable lines, one per configured thing now disallowed.


def quota_impact(tenant: Any, allowed: frozenset[str]) -> list[str]:
    if not apps.is_installed("scheduling") or not hasattr(tenant, "quotas"):
        return []
    rows = tenant.quotas.order_by("flavor__name", "pk").values_list("flavor__name", "flavor__mode", "nominal")
    return _quota_lines(rows, allowed)


def _quota_lines(rows: Any, allowed: frozenset[str]) -> list[str]:
    """Pure: (flavor name, mode, nominal) rows in flavor-name order -> the lines of the disallowed ones."""
    return [
        f"quota for flavor {name} ({mode}, {nominal} nominal) is not admitted"
        for name, mode, nominal in rows
        if mode not in allowed
    ]


def disallowed_workloads(tenant: Any, allowed: frozenset[str] | None = None) -> list[str]:
    """`allowed`: the tenant's allowed modes when the caller already read them."""
    allowed = frozenset(policy.allowed_modes(tenant)) if allowed is None else allowed
    lines: list[str] = []
    for check in (quota_impact, *registry.functions("impact_check")):
        lines.extend(check(tenant, allowed))
    return lines


def gpu_modes_condition(tenant: Any) -> dict[str, str]:
    """A Kubernetes-style condition for the tenant's status (reconcile merges it)."""
    allowed = frozenset(policy.allowed_modes(tenant))  # once: two queries, on every single reconcile
    return _condition(tenant, allowed, disallowed_workloads(tenant, allowed))


def gpu_modes_conditions_many(tenants: list[Any]) -> dict[int, dict[str, str]]:
    """`gpu_modes_condition` for many tenants in three queries, not five per tenant (the fleet pass's cold
    start). The registry's `condition` contribution: a single reconcile is a batch of one. Same rows, same
    pure pieces, same result (tests/isolation/test_impact_many.py)."""
    from .config import isolation_view, rows_many

    ids = [t.pk for t in tenants]
    levels, isolation = rows_many(tenants)  # none if this reconcile's view loader read them already
    quotas: dict[int, list[tuple[str, str, int]]] = {pk: [] for pk in ids}
    if apps.is_installed("scheduling"):  # its rows through the app registry: isolation does not import scheduling
        quota = apps.get_model("scheduling", "Quota")
        for tenant_id, *row in (quota.objects.filter(tenant_id__in=ids).order_by("tenant_id", "flavor__name", "pk")
                                .values_list("tenant_id", "flavor__name", "flavor__mode", "nominal")):
            quotas[tenant_id].append(tuple(row))  # type: ignore[arg-type]
    out: dict[int, dict[str, str]] = {}
    for tenant in tenants:
        allowed = isolation_view(tenant, levels.get(tenant.trust_level), isolation.get(tenant.pk)).allowed_modes
        lines = _quota_lines(quotas[tenant.pk], frozenset(allowed))
        for check in registry.functions("impact_check"):
            lines.extend(check(tenant, frozenset(allowed)))
        out[tenant.pk] = _condition(tenant, allowed, lines)
    return out


def _condition(tenant: Any, modes: Any, lines: list[str]) -> dict[str, str]:
    allowed = ", ".join(policy.order(modes)) or "none"
    if lines:
        status, reason = "False", "DisallowedModesConfigured"
        message = f"trust level {tenant.trust_level} allows {allowed}; " + "; ".join(lines)
    else:
        status, reason, message = "True", "AllAllowed", f"trust level {tenant.trust_level} allows {allowed}"
    return {"type": CONDITION, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": clock.now().isoformat()}
