"""The home page: "how is my fleet doing" for platform and billing admins, "how is my team doing" for
everyone else. Every figure links to the page that explains it."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from gpufleet.accounts.roles import is_billing_admin, is_platform_admin

from .. import overview


@login_required
def home(request: HttpRequest) -> HttpResponse:
    admin, billing = is_platform_admin(request.user), is_billing_admin(request.user)
    if admin or billing:
        return render(request, "portal/home_fleet.html", overview.fleet(request.user))
    tenants, total = overview.tenant_overviews(request.user, billing_admin=billing)
    return render(request, "portal/home_tenant.html", {"overviews": tenants, "tenant_total": total})
