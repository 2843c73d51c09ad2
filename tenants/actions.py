"""Every write to tenants. One transaction, one AuditEvent, reconcile enqueued on commit.

Callers (portal, API, CLI, Terraform through the API) never write Tenant or Membership rows
themselves. Validation happens before anything is written, so bad input changes nothing.
"""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction

from gpufleet import clock
from gpufleet.accounts.roles import is_platform_admin
from gpufleet.audit.record import record
from gpufleet.core import registry
from gpufleet.core.errors import ActionError, Conflict, Forbidden
from gpufleet.outbox import send as outbox

from .models import FINAL_PHASES, Membership, Phase, Tenant, TrustLevel
from .slugs import slug_errors

DISPLAY_NAME_MAX = 200


def _enqueue_reconcile(tenant_id: int) -> None:
    # Recorded in this transaction (gpufleet.outbox): the write stands even if the broker is down now.
    outbox.enqueue("tenants.reconcile_tenant", tenant_id)


def _validate_spec(display_name: Any, trust_level: Any, *, partial: bool) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    if display_name is not None or not partial:
        if not isinstance(display_name, str) or not display_name.strip():
            errors["display_name"] = ["is required"]
        elif len(display_name) > DISPLAY_NAME_MAX:
            errors["display_name"] = [f"must be at most {DISPLAY_NAME_MAX} characters"]
        elif any(ch in display_name for ch in "\r\n\t\x00"):
            errors["display_name"] = ["must be a single line of text"]
    if trust_level is not None or not partial:
        if trust_level not in TrustLevel.values:
            errors["trust_level"] = [
                f"must be one of {', '.join(TrustLevel.values)} (got {trust_level!r})"
                if trust_level not in (None, "")
                else "is required"
            ]
    return errors


def request_tenant(slug: Any, trust_level: Any, display_name: Any = None, *, requested_by: Any = None) -> Tenant:
    """A user asks for a tenant; it waits for a platform admin's approval. The requester owns it."""
    if display_name in (None, "") and isinstance(slug, str):
        display_name = slug
    errors = _validate_spec(display_name, trust_level, partial=False)
    if problems := slug_errors(slug):
        errors["slug"] = problems
    elif Tenant.objects.filter(slug=slug).exists():
        # Slugs are unique forever: a deleted tenant's slug names its history and invoices.
        errors["slug"] = [f"'{slug}' is already taken (slugs are never reused)"]
    if errors:
        raise ActionError(errors)
    try:
        with transaction.atomic():
            tenant = Tenant.objects.create(
                slug=slug,
                display_name=display_name.strip(),
                trust_level=trust_level,
                phase=Phase.REQUESTED,
                requested_by=requested_by if getattr(requested_by, "pk", None) else None,
            )
            if getattr(requested_by, "pk", None):
                Membership.objects.create(
                    tenant=tenant, user=requested_by, role=Membership.Role.OWNER, source=Membership.Source.LOCAL
                )
            # The registry's `on_request` contributions (the scheduling app gives the new tenant its home
            # placement); raising ActionError refuses the request.
            for hook in registry.functions("on_request"):
                hook(tenant)
            record("tenant.request", tenant, after=tenant.snapshot(), tenant_slug=tenant.slug)
    except IntegrityError as exc:  # a concurrent request won the race for the slug
        raise ActionError({"slug": [f"'{slug}' is already taken (slugs are never reused)"]}) from exc
    return tenant


def _locked(tenant: Tenant) -> Tenant:
    return Tenant.objects.select_for_update().get(pk=tenant.pk)


def approve(tenant: Tenant) -> Tenant:
    """Approve a requested tenant. Approving an already approved tenant changes nothing."""
    with transaction.atomic():
        tenant = _locked(tenant)
        if tenant.phase != Phase.REQUESTED:
            if tenant.phase in FINAL_PHASES or tenant.phase == Phase.DEPROVISIONING:
                raise Conflict(f"tenant '{tenant.slug}' is {tenant.phase} and cannot be approved")
            return tenant
        before = tenant.snapshot()
        tenant.phase = Phase.APPROVED
        tenant.save(update_fields=["phase", "updated"])
        record("tenant.approve", tenant, before=before, after=tenant.snapshot(), tenant_slug=tenant.slug)
        _enqueue_reconcile(tenant.pk)
    return tenant


def reject(tenant: Tenant, reason: str = "") -> Tenant:
    with transaction.atomic():
        tenant = _locked(tenant)
        if tenant.phase == Phase.REJECTED:
            return tenant
        if tenant.phase != Phase.REQUESTED:
            raise Conflict(f"only requested tenants can be rejected; '{tenant.slug}' is {tenant.phase}")
        before = tenant.snapshot()
        tenant.phase = Phase.REJECTED
        tenant.conditions = [_condition("Ready", "False", "Rejected", reason or "rejected by a platform admin")]
        tenant.save(update_fields=["phase", "conditions", "updated"])
        record("tenant.reject", tenant, before=before, after={**tenant.snapshot(), "reason": reason},
               tenant_slug=tenant.slug)
    return tenant


def update(tenant: Tenant, *, display_name: Any = None, trust_level: Any = None) -> Tenant:
    """Change the spec. Only real changes bump the generation and enqueue a reconcile."""
    errors = _validate_spec(display_name, trust_level, partial=True)
    if errors:
        raise ActionError(errors)
    with transaction.atomic():
        tenant = _locked(tenant)
        if tenant.phase in FINAL_PHASES or tenant.phase == Phase.DEPROVISIONING:
            raise Conflict(f"tenant '{tenant.slug}' is {tenant.phase} and cannot be changed")
        before = tenant.snapshot()
        changes = {}
        if display_name is not None and display_name.strip() != tenant.display_name:
            changes["display_name"] = display_name.strip()
        if trust_level is not None and trust_level != tenant.trust_level:
            changes["trust_level"] = trust_level
        if not changes:
            return tenant
        for key, value in changes.items():
            setattr(tenant, key, value)
        tenant.generation += 1
        tenant.save(update_fields=[*changes, "generation", "updated"])
        record("tenant.update", tenant, before=before, after=tenant.snapshot(), tenant_slug=tenant.slug)
        if tenant.phase != Phase.REQUESTED:
            _enqueue_reconcile(tenant.pk)
    return tenant


def _transition(tenant: Tenant, action: str, allowed: set[str], target: str) -> Tenant:
    with transaction.atomic():
        tenant = _locked(tenant)
        if tenant.phase == target:
            return tenant
        if tenant.phase not in allowed:
            raise Conflict(f"tenant '{tenant.slug}' is {tenant.phase}; cannot {action}")
        before = tenant.snapshot()
        tenant.phase = target
        tenant.generation += 1
        tenant.save(update_fields=["phase", "generation", "updated"])
        record(f"tenant.{action}", tenant, before=before, after=tenant.snapshot(), tenant_slug=tenant.slug)
        _enqueue_reconcile(tenant.pk)
    return tenant


def suspend(tenant: Tenant) -> Tenant:
    """Stop admitting GPU work; the vCluster and data stay."""
    return _transition(
        tenant, "suspend", {Phase.APPROVED, Phase.PROVISIONING, Phase.READY, Phase.FAILED}, Phase.SUSPENDED
    )


def resume(tenant: Tenant) -> Tenant:
    return _transition(tenant, "resume", {Phase.SUSPENDED}, Phase.APPROVED)


def delete(tenant: Tenant) -> Tenant:
    """Tear the tenant down. The row stays (history, billing); its slug is never reused."""
    with transaction.atomic():
        tenant = _locked(tenant)
        if tenant.phase in (Phase.DELETED, Phase.DEPROVISIONING):
            return tenant
        before = tenant.snapshot()
        if tenant.phase in (Phase.REQUESTED, Phase.REJECTED):
            # Nothing was ever provisioned.
            tenant.phase = Phase.DELETED
            tenant.generation += 1
            tenant.observed_generation = tenant.generation
            tenant.save(update_fields=["phase", "generation", "observed_generation", "updated"])
        else:
            tenant.phase = Phase.DEPROVISIONING
            tenant.generation += 1
            tenant.save(update_fields=["phase", "generation", "updated"])
            _enqueue_reconcile(tenant.pk)
        record("tenant.delete", tenant, before=before, after=tenant.snapshot(), tenant_slug=tenant.slug)
    return tenant


def _check_role_change(by: Any, tenant: Tenant, target: Membership | None, role: str | None) -> None:
    """Who may set `target` (None: a new membership) to `role` (None: remove it). `by` None is the platform
    itself (the demo, the sign-in sync); everyone else is held to the rule, whichever door they came in by.

    - A role from the identity provider's groups (source "oidc") is changed there: a local edit would turn
      it into a local grant that the next sign-in no longer corrects.
    - Nobody grants a role above their own, and only owners (and platform admins) change or remove an owner.
    """
    from .models import tenant_role

    if target is not None and target.source == Membership.Source.OIDC:
        raise Conflict(
            f"'{target.user.get_username()}' is {target.role} of '{tenant.slug}' through the identity provider "
            f"group gpufleet:{tenant.slug}:{target.role}; change it at the identity provider")
    if by is None or is_platform_admin(by):
        return
    own = tenant_role(by, tenant)
    if own == Membership.Role.OWNER:
        return
    if own is None or Membership.rank(own) < Membership.rank(Membership.Role.ADMIN):
        raise Forbidden("only the tenant's owners and admins, or platform admins, may do this")
    if target is not None and target.role == Membership.Role.OWNER:
        raise Forbidden(f"only owners of '{tenant.slug}' or platform admins may change or remove an owner")
    if role is not None and Membership.rank(role) > Membership.rank(own):
        raise Forbidden(f"may not grant a role above your own ({own}): '{role}' needs an owner or a platform admin")


def _valid_role(role: Any) -> str:
    if role not in Membership.Role.values:
        raise ActionError({"role": [f"must be one of {', '.join(Membership.Role.values)}"]})
    return str(role)


def _set_member(tenant: Tenant, user: Any, role: str) -> Membership:
    membership, _ = Membership.objects.update_or_create(
        tenant=tenant, user=user, defaults={"role": role, "source": Membership.Source.LOCAL}
    )
    record("membership.set", membership, after={"user": user.get_username(), "role": role},
           tenant_slug=tenant.slug)
    return membership


def add_member(tenant: Tenant, user: Any, role: str, *, by: Any = None) -> Membership:
    """Grant `user` a role in `tenant` (`by`: the person asking, held to _check_role_change)."""
    role = _valid_role(role)
    with transaction.atomic():
        existing = Membership.objects.select_for_update().select_related("user").filter(
            tenant=tenant, user=user).first()
        _check_role_change(by, tenant, existing, role)
        return _set_member(tenant, user, role)


def _refuse_last_owner(membership: Membership) -> None:
    """A tenant nobody may manage is an orphan: its last owner cannot leave or be demoted."""
    if membership.role == Membership.Role.OWNER and not Membership.objects.filter(
        tenant=membership.tenant, role=Membership.Role.OWNER
    ).exclude(pk=membership.pk).exists():
        raise Conflict(f"'{membership.user.get_username()}' is the last owner of '{membership.tenant.slug}'")


def change_member_role(membership: Membership, role: str, *, by: Any = None) -> Membership:
    role = _valid_role(role)
    with transaction.atomic():
        membership = Membership.objects.select_for_update().select_related("tenant", "user").get(pk=membership.pk)
        _check_role_change(by, membership.tenant, membership, role)
        if membership.role == role:
            return membership
        _refuse_last_owner(membership)
        return _set_member(membership.tenant, membership.user, role)


def remove_member(membership: Membership, *, by: Any = None) -> None:
    """Take a user's membership away (not the last owner's)."""
    with transaction.atomic():
        membership = Membership.objects.select_for_update().select_related("tenant", "user").get(pk=membership.pk)
        _check_role_change(by, membership.tenant, membership, None)
        _refuse_last_owner(membership)
        record("membership.remove", membership, before={"user": membership.user.get_username(),
               "role": membership.role, "source": membership.source}, tenant_slug=membership.tenant.slug)
        membership.delete()


def sync_oidc_memberships(user: Any, wanted: dict[str, str]) -> None:
    """Make the user's OIDC-sourced memberships match the groups claim; local grants are kept."""
    with transaction.atomic():
        current = {
            m.tenant.slug: m
            for m in Membership.objects.select_related("tenant").filter(user=user, source=Membership.Source.OIDC)
        }
        for slug, membership in current.items():
            if slug not in wanted:
                record("membership.remove", membership, before={"user": user.get_username(),
                       "role": membership.role, "source": "oidc"}, tenant_slug=slug)
                membership.delete()
        tenants = {t.slug: t for t in Tenant.objects.filter(slug__in=wanted)}
        for slug, role in sorted(wanted.items()):
            tenant = tenants.get(slug)
            if tenant is None:
                continue  # a group for a tenant that does not exist (yet) grants nothing
            existing = Membership.objects.filter(tenant=tenant, user=user).first()
            if existing is not None and existing.source == Membership.Source.LOCAL:
                continue
            if existing is not None and existing.role == role:
                continue
            membership, _ = Membership.objects.update_or_create(
                tenant=tenant, user=user, defaults={"role": role, "source": Membership.Source.OIDC}
            )
            record("membership.set", membership, after={"user": user.get_username(), "role": role,
                   "source": "oidc"}, tenant_slug=slug)


def _condition(type_: str, status: str, reason: str, message: str) -> dict[str, str]:

    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": clock.now().isoformat(),
    }
