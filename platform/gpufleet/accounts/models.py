"""API tokens: hashed at rest, shown once, revocable, tied to a user."""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.db import models

from gpufleet import clock

TOKEN_PREFIX = "gpf_"


def hash_secret(secret: str) -> str:
    # Tokens are 256-bit random strings, so a plain SHA-256 is enough (no dictionary to guard against).
    return hashlib.sha256(secret.encode()).hexdigest()


class ApiTokenQuerySet(models.QuerySet):
    def active(self) -> ApiTokenQuerySet:
        now = clock.now()
        return self.filter(revoked_at__isnull=True).filter(
            models.Q(expires_at__isnull=True) | models.Q(expires_at__gt=now)
        )

    def for_user(self, user: object) -> ApiTokenQuerySet:
        return self.filter(user=user)


class ApiToken(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    # The first characters identify the token in lists and logs without revealing it.
    prefix = models.CharField(max_length=16, db_index=True)
    digest = models.CharField(max_length=64, unique=True)
    created = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @staticmethod
    def generate() -> tuple[str, str, str]:
        """Return (plaintext, prefix, digest). The plaintext is shown once and never stored."""
        plaintext = TOKEN_PREFIX + secrets.token_urlsafe(32)
        return plaintext, plaintext[: len(TOKEN_PREFIX) + 8], hash_secret(plaintext)

    @property
    def is_active(self) -> bool:
        if self.revoked_at is not None:
            return False
        return self.expires_at is None or self.expires_at > clock.now()


from .models_oidc import OIDCIdentity  # noqa: E402  (register the model with the app)

__all__ = ["ApiToken", "OIDCIdentity"]
