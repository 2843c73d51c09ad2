"""Cohorts, priority classes, tenants' quotas, quota change requests and their simulations."""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.db import models

from scheduling.catalog.models import Flavor
from scheduling.clusters.models import (
    DEFAULT_CLUSTER_ID,
    default_cluster_id,
)
from scheduling.querysets import CatalogQuerySet, ScopedQuerySet


class Cohort(models.Model):
    """Tenants in one cohort lend and borrow idle quota; cohorts nest (Kueue parentName)."""

    name = models.CharField(max_length=63, unique=True)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="children")
    fair_sharing_weight = models.DecimalField(max_digits=8, decimal_places=3, default=Decimal(1))
    created = models.DateTimeField(auto_now_add=True)

    objects = CatalogQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class PriorityClass(models.Model):
    """A Kueue WorkloadPriorityClass; a tenant's default priority is one of these (KAI queue priority)."""

    name = models.CharField(max_length=63, unique=True)
    value = models.IntegerField()
    description = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["value", "name"]

    def __str__(self) -> str:
        return self.name


class TenantScheduling(models.Model):
    """Per-tenant scheduling settings: cohort, fair-sharing weight, priority class."""

    tenant = models.OneToOneField("tenants.Tenant", on_delete=models.CASCADE, related_name="scheduling")
    cohort = models.ForeignKey(Cohort, null=True, blank=True, on_delete=models.PROTECT, related_name="tenants")
    fair_sharing_weight = models.DecimalField(max_digits=8, decimal_places=3, default=Decimal(1))
    priority_class = models.ForeignKey(
        PriorityClass, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    objects = ScopedQuerySet.as_manager()

    def __str__(self) -> str:
        return f"scheduling of {self.tenant_id}"


class Quota(models.Model):
    """Kueue numbers for one tenant and flavor, in units of the flavor. None = no limit."""

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="quotas")
    flavor = models.ForeignKey(Flavor, on_delete=models.PROTECT, related_name="quotas")
    cluster = models.ForeignKey(
        "scheduling.Cluster", on_delete=models.PROTECT, related_name="quotas", default=default_cluster_id,
        db_default=DEFAULT_CLUSTER_ID,
    )
    nominal = models.PositiveIntegerField()
    borrowing_limit = models.PositiveIntegerField(null=True, blank=True)
    lending_limit = models.PositiveIntegerField(null=True, blank=True)
    updated = models.DateTimeField(auto_now=True)

    objects = ScopedQuerySet.as_manager()

    class Meta:
        ordering = ["tenant__slug", "flavor__name", "cluster__name"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "flavor", "cluster"], name="quota_unique_tenant_flavor_cluster")
        ]

    def __str__(self) -> str:
        return f"{self.tenant_id}/{self.flavor_id}: {self.nominal}"

    def spec(self) -> dict[str, object]:
        return {
            "flavor": self.flavor.name,
            "nominal": self.nominal,
            "borrowing_limit": self.borrowing_limit,
            "lending_limit": self.lending_limit,
        }


class QuotaChangeRequest(models.Model):
    """A tenant admin's proposed quota; a platform admin approves (applies) or rejects it."""

    class State(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        REJECTED = "rejected"

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="quota_requests")
    flavor = models.ForeignKey(Flavor, on_delete=models.PROTECT, related_name="+")
    cluster = models.ForeignKey(
        "scheduling.Cluster", on_delete=models.PROTECT, related_name="+", default=default_cluster_id,
        db_default=DEFAULT_CLUSTER_ID,
    )
    nominal = models.PositiveIntegerField()
    borrowing_limit = models.PositiveIntegerField(null=True, blank=True)
    lending_limit = models.PositiveIntegerField(null=True, blank=True)
    reason = models.TextField(blank=True)
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING, db_index=True)
    proposed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    review_comment = models.TextField(blank=True)
    # GitOps mode: the proposal branch and, once merged, the revision on main.
    branch = models.CharField(max_length=100, blank=True)
    revision = models.CharField(max_length=64, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    reviewed_at = models.DateTimeField(null=True, blank=True)

    objects = ScopedQuerySet.as_manager()

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return f"quota request {self.pk} ({self.state})"

    def spec(self) -> dict[str, object]:
        return {
            "flavor": self.flavor.name,
            "nominal": self.nominal,
            "borrowing_limit": self.borrowing_limit,
            "lending_limit": self.lending_limit,
        }


class QuotaSimulation(models.Model):
    """The simulated effect of a quota request on its cohort (scheduling/simulation/quota.py), computed
    once by the worker (scheduling.simulate_quota_request) and cached per request. The row is created
    pending with the request, in the same transaction: the worker -- or the sweep -- fills it in."""

    class State(models.TextChoices):
        PENDING = "pending"
        DONE = "done"
        FAILED = "failed"

    request = models.OneToOneField("QuotaChangeRequest", on_delete=models.CASCADE, related_name="simulation")
    days = models.PositiveSmallIntegerField(default=7, help_text="days of recorded demand replayed")
    seed = models.IntegerField(default=0)
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING, db_index=True)
    result = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)
    computed_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"simulation of quota request {self.request_id} ({self.state})"
