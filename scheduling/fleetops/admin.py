"""Admin for fleet-operations settings; every change is audited like an action's."""

from __future__ import annotations

from typing import Any

from django.contrib import admin

from gpufleet.admin_readonly import ReadOnlyAdmin
from gpufleet.audit.record import record

from .models import FleetSettings, IdleNotice, TenantIdleSettings


def _snapshot(obj: Any) -> dict[str, str]:
    return {f.name: str(getattr(obj, f.attname)) for f in obj._meta.fields if f.name != "id"}


class AuditedAdmin(admin.ModelAdmin):
    def save_model(self, request, obj, form, change) -> None:  # type: ignore[no-untyped-def]
        before = _snapshot(type(obj).objects.get(pk=obj.pk)) if change else None
        super().save_model(request, obj, form, change)
        tenant = getattr(getattr(obj, "tenant", None), "slug", "")
        record(f"fleet.{obj._meta.model_name}.{'update' if change else 'create'}", obj, before=before,
               after=_snapshot(obj), tenant_slug=tenant)

    def delete_model(self, request, obj) -> None:  # type: ignore[no-untyped-def]
        record(f"fleet.{obj._meta.model_name}.delete", obj, before=_snapshot(obj),
               tenant_slug=getattr(getattr(obj, "tenant", None), "slug", ""))
        super().delete_model(request, obj)


@admin.register(FleetSettings)
class FleetSettingsAdmin(AuditedAdmin):
    list_display = ["engine_threshold", "dram_threshold", "gpu_util_threshold", "min_idle_minutes", "rule_kind"]


@admin.register(TenantIdleSettings)
class TenantIdleSettingsAdmin(AuditedAdmin):
    list_display = ["tenant", "engine_threshold", "dram_threshold", "gpu_util_threshold", "min_idle_minutes"]


@admin.register(IdleNotice)
class IdleNoticeAdmin(ReadOnlyAdmin):
    list_display = ["tenant", "created", "message"]
