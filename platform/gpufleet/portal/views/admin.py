"""Platform-admin pages and actions: the approvals queue, approve/reject/suspend/resume, trust level."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from gpufleet.core.errors import ActionError
from tenants import actions
from tenants.models import Phase, Tenant

from ..access import platform_admin_required, require_platform_admin, scoped_tenant
from ..forms import RejectForm, TrustLevelForm

DONE = {
    "approve": "Tenant “{slug}” approved; provisioning has started.",
    "reject": "Tenant “{slug}” rejected.",
    "suspend": "Tenant “{slug}” suspended; GPU admission stops.",
    "resume": "Tenant “{slug}” resumed.",
    "trust-level": "Trust level of “{slug}” saved.",
}


@platform_admin_required
def approvals(request: HttpRequest) -> HttpResponse:
    # The page shows each request's requester; the reject reason is a plain input posted per row.
    requested = Tenant.objects.filter(phase=Phase.REQUESTED).select_related("requested_by").order_by("created", "slug")
    return render(request, "portal/approvals.html", {"requested": requested})


def _back(request: HttpRequest, tenant: Tenant) -> HttpResponse:
    """Return to the page the admin acted from (approvals queue or the tenant page)."""
    target = request.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(target, {request.get_host()}, request.is_secure()):
        return redirect(target)
    return redirect("portal:tenant-detail", slug=tenant.slug)


def _admin_action(request: HttpRequest, slug: str, verb: str, do: Callable[[Tenant], Tenant]) -> HttpResponse:
    tenant = scoped_tenant(request, slug)  # 404 first: no hint that an invisible tenant exists
    require_platform_admin(request)
    try:
        do(tenant)
    except ActionError as exc:
        for field, reasons in exc.errors.items():
            messages.error(request, f"{field.replace('_', ' ') + ': ' if field else ''}{', '.join(reasons)}")
    else:
        messages.success(request, DONE[verb].format(slug=tenant.slug))
    return _back(request, tenant)


@login_required
@require_POST
def tenant_approve(request: HttpRequest, slug: str) -> HttpResponse:
    return _admin_action(request, slug, "approve", actions.approve)


@login_required
@require_POST
def tenant_reject(request: HttpRequest, slug: str) -> HttpResponse:
    form = RejectForm(request.POST)
    reason = form.cleaned_data["reason"] if form.is_valid() else ""
    return _admin_action(request, slug, "reject", lambda t: actions.reject(t, reason))


@login_required
@require_POST
def tenant_suspend(request: HttpRequest, slug: str) -> HttpResponse:
    return _admin_action(request, slug, "suspend", actions.suspend)


@login_required
@require_POST
def tenant_resume(request: HttpRequest, slug: str) -> HttpResponse:
    return _admin_action(request, slug, "resume", actions.resume)


@login_required
@require_POST
def tenant_trust_level(request: HttpRequest, slug: str) -> HttpResponse:
    form = TrustLevelForm(request.POST)
    form.is_valid()
    level = form.cleaned_data.get("trust_level", "")

    def change(tenant: Tenant) -> Tenant:
        # To the action an empty value means "leave unchanged"; from this form it is a mistake to name.
        if not level:
            raise ActionError({"trust_level": ["is required"]})
        return actions.update(tenant, trust_level=level)

    return _admin_action(request, slug, "trust-level", change)
