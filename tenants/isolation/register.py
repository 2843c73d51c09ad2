"""Wire isolation's admin into the tenants app (imported from TenantsConfig.ready). What isolation adds to
the reconcile pipeline is declared in tenants.contributions (gpufleet.core.registry)."""

from __future__ import annotations


def register() -> None:
    from django.conf import settings

    if "django.contrib.admin" in settings.INSTALLED_APPS:
        from .admin import register_admin

        register_admin()
