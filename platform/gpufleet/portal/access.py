"""Who may see and do what in the portal. Pages declare; these helpers decide, once.

Lookups go through `Tenant.objects.for_user`, so a tenant outside the caller's scope is simply not
found (404): a member of tenant A cannot even learn that tenant B exists. Permission checks come
after the lookup for the same reason (404 before 403).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db.models import Prefetch
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404

from gpufleet.accounts.roles import is_platform_admin
from tenants.models import Membership, Tenant, can_manage

View = Callable[..., HttpResponse]


def platform_admin_required(view: View) -> View:
    """Anonymous callers are sent to sign in; signed-in non-admins get 403."""

    @login_required
    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not is_platform_admin(request.user):
            raise PermissionDenied("only platform admins may do this")
        return view(request, *args, **kwargs)

    return wrapper


def scoped_tenant(request: HttpRequest, slug: str) -> Tenant:
    """The tenant named `slug` if the caller may see it, else 404."""
    tenants = Tenant.objects.for_user(request.user).prefetch_related(
        Prefetch("memberships", queryset=Membership.objects.select_related("user").order_by("user__username"))
    )
    return get_object_or_404(tenants, slug=slug)


def require_manager(request: HttpRequest, tenant: Tenant) -> None:
    if not can_manage(request.user, tenant):
        raise PermissionDenied("only the tenant's owners and admins, or platform admins, may do this")


def require_platform_admin(request: HttpRequest) -> None:
    if not is_platform_admin(request.user):
        raise PermissionDenied("only platform admins may do this")
