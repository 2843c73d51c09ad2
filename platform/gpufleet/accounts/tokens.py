"""DRF authentication with `Authorization: Bearer gpf_…` API tokens."""

from __future__ import annotations

from datetime import timedelta

from rest_framework import authentication, exceptions
from rest_framework.request import Request

from gpufleet import clock

from .models import TOKEN_PREFIX, ApiToken, hash_secret

# Writing last_used_at on every request would turn every read into a write; once a minute is plenty.
LAST_USED_RESOLUTION = timedelta(minutes=1)


class ApiTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[object, ApiToken] | None:
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        parts = header.split()
        # split() drops every Unicode space (NBSP, U+0085...): a header of only those has no parts at all.
        if len(parts) != 2 or parts[0] != self.keyword or not parts[1].startswith(TOKEN_PREFIX):
            return None
        token = (
            ApiToken.objects.active()
            .select_related("user")
            .filter(digest=hash_secret(parts[1]))
            .first()
        )
        if token is None or not token.user.is_active:
            raise exceptions.AuthenticationFailed("invalid, expired or revoked API token")
        now = clock.now()
        if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return self.keyword
