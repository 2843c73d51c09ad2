"""Fleet-operations settings (fleet-wide and per tenant) and the notices idle findings send to tenants."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.db import models

from tenants.models import sees_every_tenant

RATIO = {"max_digits": 5, "decimal_places": 4}


class FleetSettings(models.Model):
    """One row (pk=1): idle thresholds, the minimum idle run, where idle notices go, the rule format."""

    class RuleKind(models.TextChoices):
        PROMETHEUS = "PrometheusRule", "PrometheusRule (Prometheus Operator)"
        VM = "VMRule", "VMRule (VictoriaMetrics operator)"

    engine_threshold = models.DecimalField(**RATIO, default=Decimal("0.05"))
    dram_threshold = models.DecimalField(**RATIO, default=Decimal("0.05"))
    gpu_util_threshold = models.DecimalField(**RATIO, default=Decimal("0.05"))
    min_idle_minutes = models.PositiveIntegerField(default=60)
    webhook_url = models.URLField(blank=True, help_text="idle notices are POSTed here as JSON (empty: none)")
    rule_kind = models.CharField(max_length=20, choices=RuleKind.choices, default=RuleKind.PROMETHEUS)
    queue_wait_seconds = models.PositiveIntegerField(default=1800)
    allocation_ratio = models.DecimalField(**RATIO, default=Decimal("0.80"))

    def __str__(self) -> str:
        return "fleet settings"

    @classmethod
    def current(cls) -> FleetSettings:
        """The row, or the defaults (unsaved, pk 1: `save()` creates it). Reading never writes."""
        return cls.objects.filter(pk=1).first() or cls(pk=1)

    def snapshot(self) -> dict[str, Any]:
        return {f.name: str(getattr(self, f.name)) for f in self._meta.fields if f.name != "id"}


class TenantIdleSettings(models.Model):
    """A tenant's own idle thresholds; a blank field falls back to the fleet's."""

    tenant = models.OneToOneField("tenants.Tenant", on_delete=models.CASCADE, related_name="idle_settings")
    engine_threshold = models.DecimalField(**RATIO, null=True, blank=True)
    dram_threshold = models.DecimalField(**RATIO, null=True, blank=True)
    gpu_util_threshold = models.DecimalField(**RATIO, null=True, blank=True)
    min_idle_minutes = models.PositiveIntegerField(null=True, blank=True)

    def __str__(self) -> str:
        return f"idle settings of {self.tenant_id}"


class NoticeQuerySet(models.QuerySet):
    def for_user(self, user: Any) -> NoticeQuerySet:
        if user is None or not user.is_authenticated:
            return self.none()
        if sees_every_tenant(user):  # platform and billing admins, as for idle findings (docs/api.md)
            return self
        return self.filter(tenant__memberships__user=user).distinct()


class IdleNotice(models.Model):
    """A portal notice to a tenant's owners about an idle allocation (also sent to the webhook)."""

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="idle_notices")
    finding = models.JSONField()
    message = models.CharField(max_length=500)
    created = models.DateTimeField()

    objects = NoticeQuerySet.as_manager()

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return self.message[:80]
