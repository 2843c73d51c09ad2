"""Platform roles. They are Django groups so the admin can show and edit them; OIDC groups set them."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, Group

PLATFORM_ADMIN = "platform-admin"
BILLING_ADMIN = "billing-admin"
PLATFORM_ROLES = (PLATFORM_ADMIN, BILLING_ADMIN)


def has_role(user: AbstractBaseUser | AnonymousUser | None, role: str) -> bool:
    if user is None or not user.is_authenticated:
        return False
    if getattr(user, "is_superuser", False):
        return True
    cache = getattr(user, "_gpufleet_roles", None)
    if cache is None:
        cache = set(user.groups.values_list("name", flat=True))  # type: ignore[attr-defined]
        user._gpufleet_roles = cache  # type: ignore[union-attr]
    return role in cache


def remember_roles(user: AbstractBaseUser, roles: set[str]) -> None:
    """Record the user's platform roles, read along with the user (API token authentication), so that
    has_role asks the database no more. Only PLATFORM_ROLES are ever asked for."""
    user._gpufleet_roles = {role for role in roles if role in PLATFORM_ROLES}  # type: ignore[attr-defined]


def is_platform_admin(user: AbstractBaseUser | AnonymousUser | None) -> bool:
    return has_role(user, PLATFORM_ADMIN)


def is_billing_admin(user: AbstractBaseUser | AnonymousUser | None) -> bool:
    return has_role(user, BILLING_ADMIN) or has_role(user, PLATFORM_ADMIN)


def set_platform_roles(user: AbstractBaseUser, roles: set[str] | frozenset[str]) -> tuple[set[str], set[str]]:
    """Make the user's platform roles exactly `roles` (other Django groups are left alone).

    Returns (added, removed) so the caller can audit what changed; unknown role names are ignored.
    """
    wanted = {r for r in roles if r in PLATFORM_ROLES}
    current = set(
        user.groups.filter(name__in=PLATFORM_ROLES).values_list("name", flat=True)  # type: ignore[attr-defined]
    )
    added, removed = wanted - current, current - wanted
    for role in sorted(added):
        group, _ = Group.objects.get_or_create(name=role)
        user.groups.add(group)  # type: ignore[attr-defined]
    if removed:
        user.groups.remove(*Group.objects.filter(name__in=removed))  # type: ignore[attr-defined]
    if hasattr(user, "_gpufleet_roles"):
        del user._gpufleet_roles
    return added, removed
