"""Who may see which scheduling rows: the public catalog, and rows that belong to a tenant."""

from __future__ import annotations

from django.db import models

from tenants.models import Tenant, sees_every_tenant


class CatalogQuerySet(models.QuerySet):
    """The catalog (GPU models, flavors, node pools, cohorts) is public to every signed-in user: they need
    it to ask for quota."""

    def for_user(self, user: object) -> CatalogQuerySet:
        return self if getattr(user, "is_authenticated", False) else self.none()


class ScopedQuerySet(models.QuerySet):
    """Rows that belong to a tenant: visible to its members and to platform/billing admins."""

    def for_user(self, user: object) -> ScopedQuerySet:
        if sees_every_tenant(user):
            # Every row: its tenant is a required, constrained foreign key, so "tenant in every tenant"
            # holds for all of them -- without that subquery the page is a join fewer to plan (3 ms of
            # PostgreSQL CPU per quota page: benchmarks/README.md, "API").
            return self
        return self.filter(tenant__in=Tenant.objects.for_user(user))
