"""Read-only admin: the classification table and the limits change through `gpufleet fleet health-rules`
and `health-policy` (validated, audited), remediations only through the remediation pass and uncordon."""

from __future__ import annotations

from django.contrib import admin

from gpufleet.admin_readonly import ReadOnlyAdmin

from .models import HealthRule, Remediation, RemediationPolicy, RemediationStep

for model in (HealthRule, RemediationPolicy, Remediation, RemediationStep):
    admin.site.register(model, ReadOnlyAdmin)
