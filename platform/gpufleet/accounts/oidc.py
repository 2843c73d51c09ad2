"""OIDC sign-in (authorization code + PKCE via mozilla-django-oidc).

Users are created from claims. The groups claim (GPUFLEET_OIDC_GROUPS_CLAIM) is the single source of
truth for platform roles (`platform-admin`, `billing-admin`) and for tenant memberships that came from
OIDC (`gpufleet:<tenant>:<role>`): every sign-in makes them match the claim exactly. Memberships
granted inside gpufleet (source "local") are left alone.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from .roles import PLATFORM_ROLES, set_platform_roles

log = logging.getLogger(__name__)

MEMBERSHIP_GROUP = re.compile(r"^gpufleet:(?P<tenant>[a-z0-9-]{3,40}):(?P<role>owner|admin|member|viewer)$")


def parse_groups(groups: object) -> tuple[set[str], dict[str, str]]:
    """Split a groups claim into platform roles and {tenant slug: role}.

    A user listed in several roles for one tenant gets the strongest. Unknown groups are ignored.
    """
    from tenants.models import Membership

    if isinstance(groups, str):
        groups = [groups]
    if not isinstance(groups, list | tuple):
        return set(), {}
    roles: set[str] = set()
    memberships: dict[str, str] = {}
    for group in groups:
        if not isinstance(group, str):
            continue
        if group in PLATFORM_ROLES:
            roles.add(group)
            continue
        match = MEMBERSHIP_GROUP.match(group)
        if match:
            tenant, role = match["tenant"], match["role"]
            current = memberships.get(tenant)
            if current is None or Membership.rank(role) > Membership.rank(current):
                memberships[tenant] = role
    return roles, memberships


class GpufleetOIDCBackend(OIDCAuthenticationBackend):
    def get_username(self, claims: dict[str, Any]) -> str:
        name = claims.get(settings.GPUFLEET_OIDC_USERNAME_CLAIM) or claims.get("email") or claims["sub"]
        return str(name)[:150]

    def filter_users_by_claims(self, claims: dict[str, Any]):  # type: ignore[no-untyped-def]
        # Match on the stable subject first, then on username; email alone is not an identity.
        from .models_oidc import OIDCIdentity

        sub = claims.get("sub")
        if not sub:
            return self.UserModel.objects.none()
        ident = OIDCIdentity.objects.filter(issuer=settings.OIDC_OP_ISSUER, subject=sub).first()
        if ident is not None:
            return self.UserModel.objects.filter(pk=ident.user_id)
        return self.UserModel.objects.filter(username=self.get_username(claims))

    def create_user(self, claims: dict[str, Any]):  # type: ignore[no-untyped-def]
        user = get_user_model().objects.create_user(
            username=self.get_username(claims), email=claims.get("email", "")
        )
        user.set_unusable_password()
        self._sync(user, claims)
        return user

    def update_user(self, user, claims: dict[str, Any]):  # type: ignore[no-untyped-def]
        self._sync(user, claims)
        return user

    @transaction.atomic
    def _sync(self, user, claims: dict[str, Any]) -> None:  # type: ignore[no-untyped-def]
        from tenants.actions import sync_oidc_memberships

        from .models_oidc import OIDCIdentity

        user.email = claims.get("email", user.email) or ""
        user.first_name = str(claims.get("given_name", user.first_name) or "")[:150]
        user.last_name = str(claims.get("family_name", user.last_name) or "")[:150]
        user.save()
        OIDCIdentity.objects.update_or_create(
            issuer=settings.OIDC_OP_ISSUER, subject=claims["sub"], defaults={"user": user}
        )
        roles, memberships = parse_groups(claims.get(settings.GPUFLEET_OIDC_GROUPS_CLAIM, []))
        set_platform_roles(user, roles)
        sync_oidc_memberships(user, memberships)
