"""GPU allocation policy rows: per trust level (platform-wide) and per tenant (tighten only, egress).

Loaded with tenants.models (imported at its end), so the tables belong to the `tenants` app.
"""

from __future__ import annotations

from django.db import models

from ..models import Tenant, TrustLevel


class AllocationPolicy(models.Model):
    """Which GPU allocation modes tenants of one trust level may use. Seeded with policy.DEFAULT_MODES."""

    trust_level = models.CharField(max_length=20, choices=TrustLevel.choices, unique=True)
    allowed_modes = models.JSONField(default=list, help_text="subset of whole, mig, hami")
    # Whether tenants of this level may reach the internet at all (admins may still allow
    # specific CIDRs/FQDNs per tenant when this is off).
    world_egress = models.BooleanField(default=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["trust_level"]
        verbose_name_plural = "allocation policies"

    def __str__(self) -> str:
        return f"{self.trust_level}: {', '.join(self.allowed_modes) or 'no GPUs'}"

    def snapshot(self) -> dict[str, object]:
        return {"trust_level": self.trust_level, "allowed_modes": list(self.allowed_modes),
                "world_egress": self.world_egress}


class TenantIsolation(models.Model):
    """Per-tenant isolation settings, all admin-only: a narrower mode set, extra egress."""

    tenant = models.OneToOneField(Tenant, on_delete=models.CASCADE, related_name="isolation")
    # None: the trust level's modes. A list: a subset of them (enforced by actions).
    allowed_modes = models.JSONField(null=True, blank=True)
    egress_cidrs = models.JSONField(default=list, blank=True)
    egress_fqdns = models.JSONField(default=list, blank=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["tenant__slug"]

    def __str__(self) -> str:
        return f"isolation of {self.tenant}"

    def snapshot(self) -> dict[str, object]:
        return {"allowed_modes": self.allowed_modes, "egress_cidrs": list(self.egress_cidrs),
                "egress_fqdns": list(self.egress_fqdns)}
