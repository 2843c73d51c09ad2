"""Platform admins' GPU forms in the portal: set a tenant's quota directly, create a GPU node pool. Each write
goes through scheduling.actions (checked and audited there); its errors are shown next to their fields."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from gpufleet.accounts.roles import is_platform_admin
from gpufleet.core.errors import ActionError
from scheduling.clusters.models import Cluster
from tenants.models import Tenant, TrustLevel

from . import actions
from .forms import NodePoolForm, QuotaSetForm, add_action_errors
from .models import Flavor, GpuNodePool, Quota
from .policy import allowed_modes


def _platform_admin(request: HttpRequest) -> None:
    if not is_platform_admin(request.user):
        raise PermissionDenied("only platform admins may do this")


def _initial_quota(tenant: Tenant, flavor: str | None, cluster: str | None) -> dict[str, object]:
    """The current values when the admin follows "edit" from a quota row: a change starts from what is set."""
    if not flavor:
        return {}
    rows = Quota.objects.filter(tenant=tenant, flavor__name=flavor)
    quota = (rows.filter(cluster__name=cluster) if cluster else rows).select_related("cluster").first()
    if quota is None:
        return {"flavor": flavor}
    return {"flavor": flavor, "cluster": cluster or "", "nominal": quota.nominal,
            "borrowing_limit": "" if quota.borrowing_limit is None else quota.borrowing_limit,
            "lending_limit": "" if quota.lending_limit is None else quota.lending_limit}


@login_required
def quota_set(request: HttpRequest, slug: str) -> HttpResponse:
    _platform_admin(request)
    tenant = get_object_or_404(Tenant.objects.for_user(request.user), slug=slug)
    modes = allowed_modes(tenant)
    flavors = [name for name, mode in Flavor.objects.order_by("name").values_list("name", "mode") if mode in modes]
    clusters = list(Cluster.objects.order_by("name").values_list("name", flat=True))
    form = QuotaSetForm(request.POST if request.method == "POST" else None, flavors=flavors, clusters=clusters,
                        initial=_initial_quota(tenant, request.GET.get("flavor"), request.GET.get("cluster")))
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            quota = actions.set_quota(tenant, flavor=data["flavor"], nominal=data["nominal"],
                                      borrowing_limit=data["borrowing_limit"] or None,
                                      lending_limit=data["lending_limit"] or None, cluster=data["cluster"] or None)
        except ActionError as exc:
            add_action_errors(form, exc)
        else:
            messages.success(request, f"Quota of {tenant.slug} for {quota.flavor.name} on {quota.cluster.name} set "
                                      f"to {quota.nominal} units; the fleet sync applies it.")
            return redirect("scheduling:tenant-gpu", slug=tenant.slug)
    return render(request, "scheduling/quota_set.html", {"tenant": tenant, "form": form},
                  status=400 if request.method == "POST" else 200)


@login_required
def node_pool_create(request: HttpRequest) -> HttpResponse:
    _platform_admin(request)
    form = NodePoolForm(
        request.POST if request.method == "POST" else None,
        flavors=list(Flavor.objects.order_by("name").values_list("name", flat=True)),
        clusters=list(Cluster.objects.order_by("name").values_list("name", flat=True)),
        trust_levels=list(TrustLevel.choices), policies=list(GpuNodePool.Consolidation.values))
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            pool = actions.create_node_pool(
                data["name"], flavor=data["flavor"], gpu_limit=data["gpu_limit"], gpus_per_node=data["gpus_per_node"],
                cluster=data["cluster"] or None, trust_levels=data["trust_levels"] or None,
                capacity_types=data["capacity_types"], instance_types=data["instance_types"],
                consolidation_policy=data["consolidation_policy"], consolidate_after=data["consolidate_after"],
                allow_underutilized=data["allow_underutilized"])
        except ActionError as exc:
            add_action_errors(form, exc)
        else:
            messages.success(request, f"Node pool {pool.name} created; the fleet sync renders its Karpenter "
                                      "NodePool.")
            return redirect("scheduling:flavors")
    return render(request, "scheduling/node_pool_create.html", {"form": form},
                  status=400 if request.method == "POST" else 200)
