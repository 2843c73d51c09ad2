"""Django admin for the allocation policy and per-tenant isolation.

Forms validate with the same rules as the actions (errors shown on the field, nothing saved); saves go
through the actions (audit, generation bump, reconcile).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin

from . import actions
from .models import AllocationPolicy, TenantIsolation


def _add_errors(form: forms.ModelForm, errors: dict[str, list[str]]) -> None:
    for field, reasons in errors.items():
        form.add_error(field if field in form.fields else None, "; ".join(reasons))


class AllocationPolicyForm(forms.ModelForm):
    class Meta:
        model = AllocationPolicy
        fields = ["allowed_modes", "world_egress"]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        _add_errors(self, actions.level_policy_errors(
            self.instance.trust_level, allowed_modes=data.get("allowed_modes"), world_egress=data.get("world_egress")
        ))
        return data


class TenantIsolationForm(forms.ModelForm):
    class Meta:
        model = TenantIsolation
        fields = ["allowed_modes", "egress_cidrs", "egress_fqdns"]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        _add_errors(self, actions.tenant_isolation_errors(
            self.instance.tenant, allowed_modes=data.get("allowed_modes"),
            egress_cidrs=data.get("egress_cidrs") or [], egress_fqdns=data.get("egress_fqdns") or [],
        ))
        return data


class AllocationPolicyAdmin(admin.ModelAdmin):
    form = AllocationPolicyForm
    list_display = ("trust_level", "allowed_modes", "world_egress", "updated")
    readonly_fields = ("trust_level",)

    def has_add_permission(self, request) -> bool:  # type: ignore[no-untyped-def]
        return False  # one row per trust level, seeded by migration

    def has_delete_permission(self, request, obj=None) -> bool:  # type: ignore[no-untyped-def]
        return False

    def save_model(self, request, obj, form, change) -> None:  # type: ignore[no-untyped-def]
        actions.set_level_policy(obj.trust_level, allowed_modes=obj.allowed_modes, world_egress=obj.world_egress)


class TenantIsolationAdmin(admin.ModelAdmin):
    form = TenantIsolationForm
    list_display = ("tenant", "allowed_modes", "egress_cidrs", "egress_fqdns", "updated")
    readonly_fields = ("tenant",)

    def has_add_permission(self, request) -> bool:  # type: ignore[no-untyped-def]
        return False  # created by the action (API) on first change

    def save_model(self, request, obj, form, change) -> None:  # type: ignore[no-untyped-def]
        actions.set_tenant_isolation(obj.tenant, allowed_modes=obj.allowed_modes,
                                     egress_cidrs=obj.egress_cidrs or [], egress_fqdns=obj.egress_fqdns or [])


def register_admin(site: admin.AdminSite = admin.site) -> None:
    if not site.is_registered(AllocationPolicy):
        site.register(AllocationPolicy, AllocationPolicyAdmin)
    if not site.is_registered(TenantIsolation):
        site.register(TenantIsolation, TenantIsolationAdmin)
