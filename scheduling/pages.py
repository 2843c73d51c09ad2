"""Minimal portal pages: the flavor catalog and node pools, a tenant's GPU quotas and endpoints,
quota change requests with their preview, and the platform admin's review."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from gpufleet.accounts.roles import is_platform_admin
from gpufleet.core.errors import ActionError
from scheduling.clusters.models import Placement
from scheduling.quotas.preview import preview
from tenants.models import Tenant, can_manage

from . import actions, defaults
from .figures import flavor_figures
from .forms import EndpointForm, QuotaRequestForm, ReviewForm, add_action_errors, limit_or_keep
from .models import Flavor, GpuNodePool, InferenceEndpoint, Quota, QuotaChangeRequest, SlaTier
from .policy import allowed_modes


def _tenant(request: HttpRequest, slug: str) -> Tenant:
    return get_object_or_404(Tenant.objects.for_user(request.user), slug=slug)


@login_required
def flavors(request: HttpRequest) -> HttpResponse:
    # Pool GPUs summed in the same query: one query for the table, however many flavors.
    rows = Flavor.objects.for_user(request.user).select_related("gpu_model")
    figures = flavor_figures(rows)
    return render(request, "scheduling/flavors.html", {
        "flavors": [(f, figures[f.name]) for f in rows],
        "pools": GpuNodePool.objects.select_related("flavor"),
        "tenants": Tenant.objects.for_user(request.user).order_by("slug")[:100],
    })


@login_required
def tenant_gpu(request: HttpRequest, slug: str) -> HttpResponse:
    tenant = _tenant(request, slug)
    manager = can_manage(request.user, tenant)
    modes = allowed_modes(tenant)
    allowed = [f.name for f in Flavor.objects.all() if f.mode in modes]
    defaults.ensure_rows()
    tiers = list(SlaTier.objects.values_list("name", "description"))
    placements = list(Placement.objects.filter(tenant=tenant).select_related("cluster").order_by("cluster__name"))
    quota_form = QuotaRequestForm(request.POST if "propose" in request.POST else None, flavors=allowed,
                                  clusters=[p.cluster.name for p in placements])
    endpoint_form = EndpointForm(request.POST if "endpoint" in request.POST else None, tiers=tiers)
    if request.method == "POST":
        if not manager:
            raise PermissionDenied("only the tenant's owners and admins may do this")
        if "propose" in request.POST and quota_form.is_valid():
            data = quota_form.cleaned_data
            # Limits left empty keep the quota's current ones (actions.KEEP, resolved on the cluster asked for):
            # a request for more nominal units must not quietly drop an agreed borrowing or lending limit.
            try:
                change = actions.propose_quota_change(
                    tenant, flavor=data["flavor"], nominal=data["nominal"], cluster=data["cluster"] or None,
                    borrowing_limit=limit_or_keep(data["borrowing_limit"]),
                    lending_limit=limit_or_keep(data["lending_limit"]),
                    reason=data["reason"], proposed_by=request.user)
            except ActionError as exc:
                add_action_errors(quota_form, exc)
            else:
                messages.success(request, f"Quota request {change.pk} is waiting for a platform admin.")
                return redirect("scheduling:request-detail", pk=change.pk)
        if "endpoint" in request.POST and endpoint_form.is_valid():
            data = endpoint_form.cleaned_data
            try:
                actions.create_endpoint(tenant, data["name"], model=data["model"], tier=data["tier"],
                                        deployment=data["deployment"] or None, gated=data["gated"])
            except ActionError as exc:
                add_action_errors(endpoint_form, exc)
            else:
                messages.success(request, f"Endpoint {data['name']} created.")
                return redirect("scheduling:tenant-gpu", slug=tenant.slug)
    return render(request, "scheduling/tenant_gpu.html", {
        "tenant": tenant, "can_manage": manager,
        "quotas": Quota.objects.filter(tenant=tenant).select_related("flavor", "cluster"),
        "endpoints": InferenceEndpoint.objects.filter(tenant=tenant).select_related("tier"),
        "requests": QuotaChangeRequest.objects.filter(tenant=tenant).select_related("flavor")[:20],
        "quota_form": quota_form, "endpoint_form": endpoint_form,
    }, status=400 if request.method == "POST" else 200)


@login_required
def requests(request: HttpRequest) -> HttpResponse:
    rows = QuotaChangeRequest.objects.for_user(request.user).select_related("tenant", "flavor", "proposed_by")
    return render(request, "scheduling/requests.html", {"requests": rows[:200]})


@login_required
def request_detail(request: HttpRequest, pk: int) -> HttpResponse:
    change = get_object_or_404(
        QuotaChangeRequest.objects.for_user(request.user).select_related("tenant", "flavor", "reviewed_by"), pk=pk)
    return render(request, "scheduling/request_detail.html", {
        "change": change, "preview": preview(change) if change.state == change.State.PENDING else None,
        "can_review": is_platform_admin(request.user) and change.state == change.State.PENDING,
        "form": ReviewForm(),
    })


@login_required
@require_POST
def request_review(request: HttpRequest, pk: int, verdict: str) -> HttpResponse:
    change = get_object_or_404(QuotaChangeRequest.objects.for_user(request.user), pk=pk)
    if not is_platform_admin(request.user):
        raise PermissionDenied("only platform admins may review quota requests")
    form = ReviewForm(request.POST)
    comment = form.cleaned_data["comment"] if form.is_valid() else ""
    fn = actions.approve_quota_change if verdict == "approve" else actions.reject_quota_change
    try:
        fn(change, reviewer=request.user, comment=comment)
    except ActionError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Quota request {change.pk} {'approved' if verdict == 'approve' else 'rejected'}.")
    return redirect("scheduling:request-detail", pk=change.pk)
