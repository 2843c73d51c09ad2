"""The outbox in the admin, read-only: its rows are the backlog of work waiting for the broker."""

from __future__ import annotations

from django.contrib import admin

from gpufleet.admin_readonly import ReadOnlyAdmin

from .models import OutboxMessage


@admin.register(OutboxMessage)
class OutboxMessageAdmin(ReadOnlyAdmin):
    list_display = ["created", "task", "args", "attempts", "last_error"]
