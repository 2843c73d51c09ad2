from __future__ import annotations

from django.db import models


class OutboxMessage(models.Model):
    """A Celery task committed with the write that asked for it, not yet handed to the broker."""

    created = models.DateTimeField(db_index=True)
    task = models.CharField(max_length=200)  # the registered task name, e.g. "tenants.reconcile_tenant"
    args = models.JSONField(default=list)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)

    class Meta:
        ordering = ["pk"]

    def __str__(self) -> str:
        return f"{self.task}{tuple(self.args)}"
