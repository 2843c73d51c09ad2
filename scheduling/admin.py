"""Read-only admin: writes go through scheduling.actions (invariants, audit, reconcile), never here."""

from __future__ import annotations

from django.contrib import admin

from .models import (
    Cohort,
    Flavor,
    GpuModel,
    GpuNodePool,
    InferenceEndpoint,
    PriorityClass,
    Quota,
    QuotaChangeRequest,
    SlaTier,
    TenantScheduling,
)


class ReadOnly(admin.ModelAdmin):
    def has_add_permission(self, request, obj=None) -> bool:  # type: ignore[no-untyped-def]
        return False

    def has_change_permission(self, request, obj=None) -> bool:  # type: ignore[no-untyped-def]
        return False

    def has_delete_permission(self, request, obj=None) -> bool:  # type: ignore[no-untyped-def]
        return False


for model in (GpuModel, Flavor, GpuNodePool, Cohort, PriorityClass, SlaTier, TenantScheduling, Quota,
              QuotaChangeRequest, InferenceEndpoint):
    admin.site.register(model, ReadOnly)
