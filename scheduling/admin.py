"""Read-only admin: writes go through scheduling.actions (invariants, audit, reconcile), never here."""

from __future__ import annotations

from django.contrib import admin

from gpufleet.admin_readonly import ReadOnlyAdmin

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

for model in (GpuModel, Flavor, GpuNodePool, Cohort, PriorityClass, SlaTier, TenantScheduling, Quota,
              QuotaChangeRequest, InferenceEndpoint):
    admin.site.register(model, ReadOnlyAdmin)
