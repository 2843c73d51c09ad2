"""Read-only admin views: billing rows change only through billing.actions (audited, validated)."""

from __future__ import annotations

from django.contrib import admin

from gpufleet.admin_readonly import ReadOnlyAdmin

from .models import Invoice, InvoiceLine, Price, UsageCollection, UsageRecord


class LineInline(admin.TabularInline):
    model = InvoiceLine
    fk_name = "invoice"
    extra = 0
    can_delete = False
    fields = ["position", "kind", "flavor_name", "quantity", "unit_price", "amount", "unit_seconds"]
    readonly_fields = fields

    def has_add_permission(self, request, obj=None) -> bool:  # type: ignore[no-untyped-def]
        return False


@admin.register(Invoice)
class InvoiceAdmin(ReadOnlyAdmin):
    list_display = ["number", "tenant", "period", "state", "total", "currency"]
    list_filter = ["state", "period", "currency"]
    search_fields = ["number", "tenant__slug"]
    inlines = [LineInline]


@admin.register(Price)
class PriceAdmin(ReadOnlyAdmin):
    list_display = ["flavor", "currency", "per_unit_hour", "effective_from", "effective_to", "source"]


@admin.register(UsageRecord)
class UsageRecordAdmin(ReadOnlyAdmin):
    list_display = ["tenant", "flavor", "hour", "unit_seconds", "gpu_equivalent_seconds"]
    list_filter = ["flavor"]


@admin.register(UsageCollection)
class UsageCollectionAdmin(ReadOnlyAdmin):
    list_display = ["window_start", "window_end", "collected_at", "records", "replaced"]
