"""Writes to the GPU allocation policy and per-tenant isolation. Platform admins only (callers check).

One transaction, one AuditEvent, reconciles enqueued on commit. Bad input raises ActionError naming
the field, before anything is written.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from gpufleet.audit.record import record
from gpufleet.core.errors import ActionError, Conflict
from gpufleet.outbox import send as outbox

from ..models import FINAL_PHASES, Phase, Tenant, TrustLevel
from . import egress, policy
from .models import AllocationPolicy, TenantIsolation

UNSET: Any = object()


def _enqueue(tenant_ids: list[int]) -> None:
    for tenant_id in tenant_ids:  # recorded in this transaction: no broker needed now (gpufleet.outbox)
        outbox.enqueue("tenants.reconcile_tenant", tenant_id)


def level_policy_errors(trust_level: Any, *, allowed_modes: Any = UNSET, world_egress: Any = UNSET
                        ) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    if trust_level not in TrustLevel.values:
        errors["trust_level"] = [f"must be one of {', '.join(TrustLevel.values)}"]
    if allowed_modes is not UNSET:
        errors.update(policy.mode_errors(allowed_modes))
    if world_egress is not UNSET and not isinstance(world_egress, bool):
        errors["world_egress"] = ["must be true or false"]
    return errors


def set_level_policy(trust_level: Any, *, allowed_modes: Any = UNSET, world_egress: Any = UNSET) -> AllocationPolicy:
    """Change what a trust level allows; every live tenant of that level is re-rendered."""
    errors = level_policy_errors(trust_level, allowed_modes=allowed_modes, world_egress=world_egress)
    if errors:
        raise ActionError(errors)
    with transaction.atomic():
        row, _ = AllocationPolicy.objects.select_for_update().get_or_create(
            trust_level=trust_level,
            defaults={"allowed_modes": policy.order(policy.DEFAULT_MODES[trust_level]),
                      "world_egress": policy.DEFAULT_WORLD_EGRESS[trust_level]},
        )
        before = row.snapshot()
        if allowed_modes is not UNSET:
            row.allowed_modes = policy.order(allowed_modes)
        if world_egress is not UNSET:
            row.world_egress = world_egress
        if row.snapshot() == before:
            return row
        row.save()
        record("allocation_policy.update", row, before=before, after=row.snapshot())
        tenants = list(Tenant.objects.live().filter(trust_level=trust_level).values_list("pk", flat=True))
        _bump(tenants)
        _enqueue(tenants)
    return row


def _bump(tenant_ids: list[int]) -> None:
    """A policy change is a spec change of each affected tenant: 'is my change live?' needs a generation."""
    from django.db.models import F

    Tenant.objects.filter(pk__in=tenant_ids).update(generation=F("generation") + 1)


def tenant_isolation_errors(
    tenant: Tenant, *, allowed_modes: Any = UNSET, egress_cidrs: Any = UNSET, egress_fqdns: Any = UNSET
) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    if allowed_modes is not UNSET and allowed_modes is not None:
        errors.update(policy.mode_errors(allowed_modes))
        if not errors:
            level = policy.level_modes(tenant.trust_level)
            wider = sorted(set(allowed_modes) - level)
            if wider:
                errors["allowed_modes"] = [
                    f"can only tighten the '{tenant.trust_level}' trust level's modes "
                    f"({', '.join(policy.order(level)) or 'none'}); not allowed: {', '.join(wider)}"
                ]
    if egress_cidrs is not UNSET and (problems := egress.cidr_errors(egress_cidrs)):
        errors["egress_cidrs"] = problems
    if egress_fqdns is not UNSET and (problems := egress.fqdn_errors(egress_fqdns)):
        errors["egress_fqdns"] = problems
    return errors


def set_tenant_isolation(
    tenant: Tenant, *, allowed_modes: Any = UNSET, egress_cidrs: Any = UNSET, egress_fqdns: Any = UNSET
) -> TenantIsolation:
    """Tighten a tenant's GPU modes (never beyond its trust level's) and grant egress exceptions.

    `allowed_modes=None` returns the tenant to its trust level's modes.
    """
    errors = tenant_isolation_errors(tenant, allowed_modes=allowed_modes, egress_cidrs=egress_cidrs,
                                     egress_fqdns=egress_fqdns)
    if errors:
        raise ActionError(errors)
    with transaction.atomic():
        tenant = Tenant.objects.select_for_update().get(pk=tenant.pk)
        if tenant.phase in FINAL_PHASES or tenant.phase == Phase.DEPROVISIONING:
            raise Conflict(f"tenant '{tenant.slug}' is {tenant.phase} and cannot be changed")
        iso, _ = TenantIsolation.objects.get_or_create(tenant=tenant)
        before = iso.snapshot()
        if allowed_modes is not UNSET:
            iso.allowed_modes = None if allowed_modes is None else policy.order(allowed_modes)
        if egress_cidrs is not UNSET:
            iso.egress_cidrs = sorted(egress_cidrs)
        if egress_fqdns is not UNSET:
            iso.egress_fqdns = sorted(egress_fqdns)
        if iso.snapshot() == before:
            return iso
        iso.save()
        record("tenant.isolation.update", iso, before=before, after=iso.snapshot(), tenant_slug=tenant.slug)
        if tenant.phase != Phase.REQUESTED:
            _bump([tenant.pk])
            _enqueue([tenant.pk])
    return iso
