"""Portal: tenant page -> workloads, each with why it is pending (scheduling.pending)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from infra.errors import PermanentError, TransientError
from scheduling.pending import sources as pending_sources
from tenants.models import Tenant


@login_required
def workloads(request: HttpRequest, slug: str) -> HttpResponse:
    # Scoped: a tenant the caller may not see is a 404, and only its own namespace is read.
    tenant = get_object_or_404(Tenant.objects.for_user(request.user), slug=slug)
    error, found = "", []
    try:
        found = pending_sources.Sources(pending_sources.cluster_ops()).explain_all(tenant)
    except (TransientError, PermanentError) as exc:
        error = str(exc)
    return render(request, "scheduling/workloads.html", {
        "tenant": tenant, "workloads": found, "error": error,
        "pending": sum(1 for e in found if e.pending)})
