"""Django admin for the allocation policy. Saves go through actions (validation, audit, reconcile)."""

from __future__ import annotations

from django.contrib import admin, messages

from ..errors import ActionError
from . import actions
from .models import AllocationPolicy, TenantIsolation


class AllocationPolicyAdmin(admin.ModelAdmin):
    list_display = ("trust_level", "allowed_modes", "world_egress", "updated")
    readonly_fields = ("trust_level",)

    def has_add_permission(self, request) -> bool:  # type: ignore[no-untyped-def]
        return False  # one row per trust level, seeded by migration

    def has_delete_permission(self, request, obj=None) -> bool:  # type: ignore[no-untyped-def]
        return False

    def save_model(self, request, obj, form, change) -> None:  # type: ignore[no-untyped-def]
        try:
            actions.set_level_policy(obj.trust_level, allowed_modes=obj.allowed_modes, world_egress=obj.world_egress)
        except ActionError as exc:
            self.message_user(request, str(exc), level=messages.ERROR)


class TenantIsolationAdmin(admin.ModelAdmin):
    list_display = ("tenant", "allowed_modes", "egress_cidrs", "egress_fqdns", "updated")
    readonly_fields = ("tenant",)

    def has_add_permission(self, request) -> bool:  # type: ignore[no-untyped-def]
        return False  # created by the action on first change

    def save_model(self, request, obj, form, change) -> None:  # type: ignore[no-untyped-def]
        try:
            actions.set_tenant_isolation(obj.tenant, allowed_modes=obj.allowed_modes,
                                         egress_cidrs=obj.egress_cidrs, egress_fqdns=obj.egress_fqdns)
        except ActionError as exc:
            self.message_user(request, str(exc), level=messages.ERROR)


def register_admin(site: admin.AdminSite = admin.site) -> None:
    if not site.is_registered(AllocationPolicy):
        site.register(AllocationPolicy, AllocationPolicyAdmin)
    if not site.is_registered(TenantIsolation):
        site.register(TenantIsolation, TenantIsolationAdmin)
