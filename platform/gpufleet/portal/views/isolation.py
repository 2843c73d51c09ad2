"""A tenant's isolation in words, the traffic Cilium dropped in its namespace, and its kubeconfig:
portal pages (the same data the API serves as JSON), so no portal page links into /api/."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from gpufleet.core import conf
from gpufleet.core.errors import ActionError
from infra.cilium import CiliumCLI
from infra.errors import InfraError
from tenants.isolation.kubeconfig import kubeconfig_yaml
from tenants.isolation.summary import describe, isolation_data

from ..access import scoped_tenant


@login_required
def isolation(request: HttpRequest, slug: str) -> HttpResponse:
    tenant = scoped_tenant(request, slug)
    data = isolation_data(tenant)
    return render(request, "tenants/isolation.html",
                  {"tenant": tenant, "data": data, "about": describe(data, tenant.slug)})


@login_required
def dropped_flows(request: HttpRequest, slug: str) -> HttpResponse:
    """Hubble's dropped flows for the tenant's namespace. Hubble missing or unreachable is an empty
    state that says so (200: the page works, the data source is what is absent), not an error page."""
    tenant = scoped_tenant(request, slug)
    cli = CiliumCLI(timeout=float(conf.HUBBLE_TIMEOUT_SECONDS))
    try:
        flows, unavailable = cli.dropped_flows(tenant.namespace), ""
    except InfraError as exc:
        flows, unavailable = [], str(exc)
    return render(request, "tenants/dropped_flows.html",
                  {"tenant": tenant, "flows": flows, "unavailable": unavailable})


@login_required
def kubeconfig(request: HttpRequest, slug: str) -> HttpResponse:
    tenant = scoped_tenant(request, slug)
    try:
        body = kubeconfig_yaml(tenant)
    except ActionError as exc:
        # No kubeconfig can be given (e.g. no OIDC issuer configured): a page that says why, not a 500.
        reasons = [reason for reasons in exc.errors.values() for reason in reasons]
        return render(request, "tenants/kubeconfig_unavailable.html", {"tenant": tenant, "reasons": reasons},
                      status=409)
    response = HttpResponse(body, content_type="application/yaml")
    response["Content-Disposition"] = f'attachment; filename="{tenant.slug}-kubeconfig.yaml"'
    return response
