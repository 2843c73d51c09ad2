"""Tenant and Membership."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models

from gpufleet.accounts.roles import is_billing_admin, is_platform_admin


class TrustLevel(models.TextChoices):
    UNTRUSTED = "untrusted", "Untrusted (whole GPUs only)"
    STANDARD = "standard", "Standard (whole GPUs or MIG)"
    TRUSTED = "trusted", "Trusted (whole, MIG or HAMi shares)"


class Phase(models.TextChoices):
    REQUESTED = "requested"
    APPROVED = "approved"
    PROVISIONING = "provisioning"
    READY = "ready"
    SUSPENDED = "suspended"
    DEPROVISIONING = "deprovisioning"
    DELETED = "deleted"
    FAILED = "failed"
    REJECTED = "rejected"


# Phases in which the tenant's objects should exist in the cluster.
LIVE_PHASES = {Phase.APPROVED, Phase.PROVISIONING, Phase.READY, Phase.SUSPENDED, Phase.FAILED}
# Phases that will never change again.
FINAL_PHASES = {Phase.DELETED, Phase.REJECTED}


def sees_every_tenant(user: Any) -> bool:
    """Platform and billing admins see every tenant (and every row that belongs to one)."""
    return user is not None and user.is_authenticated and (is_platform_admin(user) or is_billing_admin(user))


class TenantQuerySet(models.QuerySet):
    def for_user(self, user: Any) -> TenantQuerySet:
        """What the caller may see: platform admins see every tenant, others their memberships."""
        if user is None or not user.is_authenticated:
            return self.none()
        if sees_every_tenant(user):
            return self
        return self.filter(memberships__user=user).distinct()

    def live(self) -> TenantQuerySet:
        return self.filter(phase__in=LIVE_PHASES | {Phase.DEPROVISIONING})


class Tenant(models.Model):
    slug = models.CharField(max_length=40, unique=True)
    display_name = models.CharField(max_length=200)
    trust_level = models.CharField(max_length=20, choices=TrustLevel.choices)
    phase = models.CharField(max_length=20, choices=Phase.choices, default=Phase.REQUESTED, db_index=True)
    generation = models.PositiveIntegerField(default=1)
    observed_generation = models.PositiveIntegerField(default=0)
    # Kubernetes-style conditions: [{type, status, reason, message, lastTransitionTime}]
    conditions = models.JSONField(default=list, blank=True)
    applied_digest = models.CharField(max_length=64, blank=True)
    applied_objects = models.JSONField(default=list, blank=True)
    last_reconciled_at = models.DateTimeField(null=True, blank=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    objects = TenantQuerySet.as_manager()

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug

    @property
    def namespace(self) -> str:
        return f"tenant-{self.slug}"

    @property
    def owner(self) -> str:
        return f"tenant:{self.slug}"

    @property
    def is_synced(self) -> bool:
        return self.observed_generation >= self.generation

    def condition(self, type_: str) -> dict[str, Any] | None:
        return next((c for c in self.conditions if c.get("type") == type_), None)

    def spec(self) -> dict[str, Any]:
        """The user-editable fields, as recorded in audit before/after."""
        return {"display_name": self.display_name, "trust_level": self.trust_level}

    def snapshot(self) -> dict[str, Any]:
        return {"slug": self.slug, **self.spec(), "phase": self.phase, "generation": self.generation}


class Membership(models.Model):
    class Role(models.TextChoices):
        OWNER = "owner"
        ADMIN = "admin"
        MEMBER = "member"
        VIEWER = "viewer"

    class Source(models.TextChoices):
        OIDC = "oidc", "From the identity provider's groups"
        LOCAL = "local", "Granted in gpufleet"

    _RANK = {"viewer": 0, "member": 1, "admin": 2, "owner": 3}

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices)
    source = models.CharField(max_length=10, choices=Source.choices, default=Source.LOCAL)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["tenant__slug", "user__username"]
        constraints = [models.UniqueConstraint(fields=["tenant", "user"], name="membership_unique")]
        indexes = [models.Index(fields=["user", "tenant"], name="membership_user_idx")]

    def __str__(self) -> str:
        return f"{self.user} is {self.role} of {self.tenant}"

    @classmethod
    def rank(cls, role: str) -> int:
        return cls._RANK.get(role, -1)


def tenant_role(user: Any, tenant: Tenant) -> str | None:
    """The caller's role in a tenant, or None."""
    if user is None or not user.is_authenticated:
        return None
    return (
        Membership.objects.filter(tenant=tenant, user=user).values_list("role", flat=True).first()
    )


def can_manage(user: Any, tenant: Tenant) -> bool:
    """Owners and admins of a tenant, and platform admins, may change it."""
    if is_platform_admin(user):
        return True
    role = tenant_role(user, tenant)
    return role is not None and Membership.rank(role) >= Membership.rank("admin")


__all__ = ["LIVE_PHASES", "Membership", "Phase", "Tenant", "TrustLevel", "can_manage", "tenant_role"]

# Isolation policy tables live in their own module; importing them here registers them with the app.
from .isolation.models import AllocationPolicy, TenantIsolation  # noqa: E402

__all__ += ["AllocationPolicy", "TenantIsolation"]
