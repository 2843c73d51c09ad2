"""DRF authentication with `Authorization: Bearer gpf_…` API tokens."""

from __future__ import annotations

from datetime import timedelta

from django.contrib.auth.models import Group
from django.db.models import Exists, OuterRef
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from gpufleet import clock

from .models import TOKEN_PREFIX, ApiToken, hash_secret
from .roles import PLATFORM_ROLES, remember_roles

# Writing last_used_at on every request would turn every read into a write; once a minute is plenty.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def _role_flag(role: str) -> str:
    return "has_role_" + role.replace("-", "_")


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
        # The user's platform roles come with the token (EXISTS per role), so the views' role checks
        # (roles.has_role) cost no query of their own: one query authenticates a read, not two.
        token = (
            ApiToken.objects.active()
            .select_related("user")
            .annotate(**{_role_flag(role): Exists(Group.objects.filter(user=OuterRef("user_id"), name=role))
                         for role in PLATFORM_ROLES})
            .filter(digest=hash_secret(parts[1]))
            .order_by()
            .first()
        )
        if token is None or not token.user.is_active:
            raise exceptions.AuthenticationFailed("invalid, expired or revoked API token")
        remember_roles(token.user, {role for role in PLATFORM_ROLES if getattr(token, _role_flag(role))})
        now = clock.now()
        if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return self.keyword
