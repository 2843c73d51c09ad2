"""Account writes. Sign-in through OIDC brings the user's profile, roles and memberships in line with the claims."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction

from gpufleet.audit.context import acting
from gpufleet.audit.record import record
from tenants.actions import sync_oidc_memberships

from .groups import parse_groups
from .models_oidc import OIDCIdentity
from .roles import set_platform_roles

USERNAME_MAX = 150


def _claim_text(claims: dict[str, Any], name: str, limit: int) -> str:
    value = claims.get(name)
    return value.strip()[:limit] if isinstance(value, str) else ""


def _free_username(wanted: str) -> str:
    """`wanted`, or `wanted-2`, `wanted-3`… — a new identity never takes over an existing account by name."""
    User = get_user_model()
    base = wanted[:USERNAME_MAX] or "user"
    candidate, n = base, 1
    while User.objects.filter(username=candidate).exists():
        n += 1
        suffix = f"-{n}"
        candidate = base[: USERNAME_MAX - len(suffix)] + suffix
    return candidate


def create_oidc_user(issuer: str, claims: dict[str, Any], *, username: str, groups_claim: str) -> Any:
    """First sign-in of an (issuer, subject): a new user without a usable password, linked to the identity."""
    with transaction.atomic():
        user = get_user_model().objects.create_user(username=_free_username(username))
        # create_user(password=None) already stores an unusable password: this account signs in via OIDC only.
        OIDCIdentity.objects.create(issuer=issuer, subject=str(claims["sub"]), user=user)
        with acting(user_id=user.pk):
            record("account.create", user, after={"username": user.get_username(), "issuer": issuer,
                                                  "subject": str(claims["sub"])})
            _sync(user, claims, groups_claim)
    return user


def sync_oidc_user(user: Any, claims: dict[str, Any], *, groups_claim: str) -> Any:
    """Every later sign-in: profile, platform roles and OIDC memberships follow the claims."""
    with transaction.atomic(), acting(user_id=user.pk):
        _sync(user, claims, groups_claim)
    return user


def _sync(user: Any, claims: dict[str, Any], groups_claim: str) -> None:
    profile = {
        "email": _claim_text(claims, "email", 254),
        "first_name": _claim_text(claims, "given_name", 150),
        "last_name": _claim_text(claims, "family_name", 150),
    }
    changed = [name for name, value in profile.items() if getattr(user, name) != value]
    if changed:
        for name in changed:
            setattr(user, name, profile[name])
        user.save(update_fields=changed)
    grants = parse_groups(claims.get(groups_claim, []))
    added, removed = set_platform_roles(user, grants.platform_roles)
    if added or removed:
        before = (set(grants.platform_roles) - added) | removed
        record("account.roles.set", user, before={"roles": sorted(before)},
               after={"roles": sorted(grants.platform_roles), "source": "oidc"})
    sync_oidc_memberships(user, grants.memberships)
