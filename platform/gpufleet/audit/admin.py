from django.contrib import admin

from gpufleet.admin_readonly import ReadOnlyAdmin

from .models import AuditEvent


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = ("created", "actor_label", "action", "object_repr", "tenant_slug")
    list_filter = ("action", "object_type")
    search_fields = ("object_repr", "tenant_slug", "actor_label", "request_id")
