"""What a narrower GPU mode set breaks: configured workloads that would no longer be admitted.

Known here: the tenant's configured quotas (scheduling's Quota rows name a flavor with a mode).
Other apps add checks to IMPACT_CHECKS. Running pods are only known to a live cluster: Kyverno's
background scan reports them (the Policy is rendered with `background: true`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.apps import apps

from gpufleet import clock

from . import policy

CONDITION = "GpuModesAdmitted"
# Functions (tenant, allowed modes) -> human-readable lines, one per configured thing now disallowed.
IMPACT_CHECKS: list[Callable[[Any, frozenset[str]], list[str]]] = []


def quota_impact(tenant: Any, allowed: frozenset[str]) -> list[str]:
    if not apps.is_installed("scheduling") or not hasattr(tenant, "quotas"):
        return []
    return [
        f"quota for flavor {q.flavor.name} ({q.flavor.mode}, {q.nominal} nominal) is not admitted"
        for q in tenant.quotas.select_related("flavor").order_by("flavor__name")
        if q.flavor.mode not in allowed
    ]


def disallowed_workloads(tenant: Any) -> list[str]:
    allowed = frozenset(policy.allowed_modes(tenant))
    lines: list[str] = []
    for check in (quota_impact, *IMPACT_CHECKS):
        lines.extend(check(tenant, allowed))
    return lines


def gpu_modes_condition(tenant: Any) -> dict[str, str]:
    """A Kubernetes-style condition for the tenant's status (reconcile merges it)."""
    allowed = ", ".join(policy.order(policy.allowed_modes(tenant))) or "none"
    lines = disallowed_workloads(tenant)
    if lines:
        status, reason = "False", "DisallowedModesConfigured"
        message = f"trust level {tenant.trust_level} allows {allowed}; " + "; ".join(lines)
    else:
        status, reason, message = "True", "AllAllowed", f"trust level {tenant.trust_level} allows {allowed}"
    return {"type": CONDITION, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": clock.now().isoformat()}
