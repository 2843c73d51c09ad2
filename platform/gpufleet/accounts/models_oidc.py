"""Link between an OIDC subject and a local user (subjects are stable; usernames may change)."""

from django.conf import settings
from django.db import models


class OIDCIdentity(models.Model):
    issuer = models.CharField(max_length=300)
    subject = models.CharField(max_length=255)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="oidc_identities")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="oidc_identity_unique")]

    def __str__(self) -> str:
        return f"{self.subject}@{self.issuer}"
