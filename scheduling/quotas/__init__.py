"""Quotas: cohorts, priority classes, tenants' quotas and change requests (models), previews and proposal branches."""
