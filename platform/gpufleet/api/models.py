"""Idempotency keys: a retried POST (same key, same body) gets the first answer instead of a second create."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import models

KEY_LIFETIME = timedelta(hours=24)
KEY_MAX = 200


class IdempotencyKey(models.Model):
    """One row per (user, key). `status` is null while the first request is still running."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=KEY_MAX)
    method = models.CharField(max_length=10)
    path = models.CharField(max_length=500)
    request_digest = models.CharField(max_length=64)  # sha256 of method, path and the canonical JSON body
    status = models.PositiveSmallIntegerField(null=True, blank=True)
    response_body = models.JSONField(null=True, blank=True)
    created = models.DateTimeField()
    expires_at = models.DateTimeField(db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "key"], name="idempotency_key_unique")]

    def __str__(self) -> str:
        return f"{self.method} {self.path} [{self.key}]"
