"""Factory functions for test rows. They go through actions where the real code path does."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model

from gpufleet.accounts.roles import set_platform_roles
from tenants import actions
from tenants.models import Membership, Phase, Tenant


def user(username: str, *, roles: set[str] | None = None, password: str = "pw-for-tests") -> Any:
    User = get_user_model()
    obj, created = User.objects.get_or_create(username=username, defaults={"email": f"{username}@example.test"})
    if created:
        obj.set_password(password)
        obj.save()
    set_platform_roles(obj, roles or set())
    return obj


def tenant(slug: str = "acme", trust_level: str = "standard", *, owner: Any = None, phase: str | None = None,
           members: dict[str, Any] | None = None) -> Tenant:
    obj = actions.request_tenant(slug, trust_level, f"{slug} team", requested_by=owner)
    for role, member in (members or {}).items():
        Membership.objects.update_or_create(tenant=obj, user=member, defaults={"role": role})
    if phase is not None and phase != Phase.REQUESTED:
        Tenant.objects.filter(pk=obj.pk).update(phase=phase)
        obj.refresh_from_db()
    return obj
