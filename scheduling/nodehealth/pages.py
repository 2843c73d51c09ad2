"""Portal (platform admins): GPU node health, remediations with their evidence, and uncordon."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from billing import metrics_source
from gpufleet.accounts.roles import is_platform_admin
from infra.errors import PermanentError, TransientError

from . import kube
from .models import HealthRule, Remediation, RemediationPolicy
from .remediation import assess, uncordon
from .summary import health_summary


def _admin(request: HttpRequest) -> None:
    if not is_platform_admin(request.user):
        raise PermissionDenied("only platform admins see node health")


@login_required
def health(request: HttpRequest) -> HttpResponse:
    _admin(request)
    error, report = "", []
    outage = metrics_source.outage(kube.metrics_client_url(), cluster=kube.CLUSTER)
    if outage is None:
        try:
            report = assess(None, ops=kube.cluster_ops(), metrics=kube.metrics_client()).report()
        except (TransientError, PermanentError) as exc:
            reason = metrics_source.plain_reason(exc)  # the exception's text names hosts
            error = f"Node health could not be read: the cluster or the metrics source is {reason}."
    return render(request, "nodehealth/health.html", {
        "report": report, "error": error, "outage": outage, "policy": RemediationPolicy.current(),
        "rules": HealthRule.objects.all(), "health": health_summary(),
        "remediations": Remediation.objects.prefetch_related("steps")[:50]})


@login_required
@require_POST
def uncordon_node(request: HttpRequest, node: str) -> HttpResponse:
    _admin(request)
    try:
        uncordon(node, kube.cluster_ops(), note=str(request.POST.get("note", ""))[:200])
    except LookupError as exc:
        messages.error(request, str(exc))
    except (TransientError, PermanentError) as exc:
        messages.error(request, f"the cluster refused: {exc}")
    else:
        messages.success(request, f"{node} is schedulable again.")
    return redirect("scheduling:node-health")
