"""SLA tiers and tenants' inference endpoints."""

from __future__ import annotations

from decimal import Decimal

from django.db import models

from scheduling.querysets import ScopedQuerySet


class SlaTier(models.Model):
    """Scale-to-zero policy of an inference endpoint. Defaults are seeded; platform admins edit them."""

    name = models.CharField(max_length=30, unique=True)
    min_replicas = models.PositiveSmallIntegerField()
    max_replicas = models.PositiveSmallIntegerField(default=4)
    cooldown_seconds = models.PositiveIntegerField(default=300)
    polling_seconds = models.PositiveIntegerField(default=30)
    # Cron pre-warm (KEDA cron trigger) in GPUFLEET_BUSINESS_TIMEZONE; empty = none.
    prewarm_start = models.CharField(max_length=40, blank=True)
    prewarm_end = models.CharField(max_length=40, blank=True)
    prewarm_replicas = models.PositiveSmallIntegerField(default=1)
    description = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["-min_replicas", "name"]

    def __str__(self) -> str:
        return self.name


class InferenceEndpoint(models.Model):
    """A vLLM deployment in the tenant's namespace, scaled (to zero) by KEDA on queue depth and KV cache."""

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="endpoints")
    name = models.CharField(max_length=50)
    model = models.CharField(max_length=200, help_text="served model name (vLLM `model_name` label)")
    deployment = models.CharField(max_length=63, help_text="the Deployment KEDA scales")
    tier = models.ForeignKey(SlaTier, on_delete=models.PROTECT, related_name="endpoints")
    # Scale out when this many requests wait per replica, or the KV cache is this full (0-1).
    queue_target = models.PositiveIntegerField(default=5)
    kv_cache_target = models.DecimalField(max_digits=4, decimal_places=3, default=Decimal("0.800"))
    # Issue 26, F6: a gated Hugging Face model cannot be downloaded without the tenant's token, so its pods
    # mount the token Secret as required (they wait for it) and the endpoint needs a secret store to exist.
    gated = models.BooleanField(default=False, db_default=False,  # old code's INSERTs lack it (expand/contract)
                                help_text="the model is gated: serving needs the tenant's Hugging Face token from "
                                          "OpenBao")
    created = models.DateTimeField(auto_now_add=True)

    objects = ScopedQuerySet.as_manager()

    class Meta:
        ordering = ["tenant__slug", "name"]
        constraints = [models.UniqueConstraint(fields=["tenant", "name"], name="endpoint_unique_tenant_name")]

    def __str__(self) -> str:
        return f"{self.tenant_id}/{self.name}"
