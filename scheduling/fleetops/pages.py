"""Portal pages of fleet operations: the admin fleet page and a tenant's utilisation and idle findings.

Both measure month-to-date in the TSDB when opened; a metrics outage shows a message, not an error page."""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest, PermissionDenied
from django.db.models import Sum
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from billing import collect as billing_collect
from billing.metering.usage import MeteringInputError
from gpufleet import clock
from gpufleet.accounts.roles import is_platform_admin
from gpufleet.instants import InstantError, parse_instant
from infra.errors import PermanentError, TransientError
from scheduling.models import Flavor, InferenceEndpoint, Quota
from scheduling.nodehealth.summary import health_summary
from tenants.models import Tenant

from . import queues, service
from .models import FleetSettings, IdleNotice

HOURS = Decimal(3600)


def _window(request: HttpRequest) -> tuple[datetime, datetime]:
    """?start=&end= (whole hours, UTC), else month to date."""
    now = clock.now().replace(minute=0, second=0, microsecond=0)
    start, end = now.replace(day=1, hour=0), now
    for name in ("start", "end"):
        if request.GET.get(name):
            try:
                moment = parse_instant(request.GET[name])
            except InstantError as exc:
                raise BadRequest(f"{name}: {exc.reason}") from exc
            start, end = (moment, end) if name == "start" else (start, moment)
    start, end = start.replace(minute=0, second=0, microsecond=0), end.replace(minute=0, second=0, microsecond=0)
    return start, max(end, start + timedelta(hours=1))


def _measure(start: datetime, end: datetime, tenants: list[str] | None) -> tuple[list, list, str]:
    try:
        return (service.utilisation(start, end, tenants=tenants),
                service.idle_findings(start, end, tenants=tenants), "")
    except (MeteringInputError, TransientError, PermanentError) as exc:
        return [], [], f"The metrics server could not be queried: {exc}"


@login_required
def fleet(request: HttpRequest) -> HttpResponse:
    if not is_platform_admin(request.user):
        raise PermissionDenied("the fleet page is for platform admins")
    start, end = _window(request)
    util, findings, error = _measure(start, end, None)
    per_flavor: dict[str, dict[str, Any]] = defaultdict(lambda: defaultdict(Decimal))
    for row in util:
        acc = per_flavor[row["flavor"]]
        acc["allocated"] += row["allocated_gpu_equivalent_seconds"] / HOURS
        acc["active"] += row["active_gpu_equivalent_seconds"] / HOURS
    for f in findings:
        acc = per_flavor[f["flavor"]]
        acc["idle"] += Decimal(f["gpu_equivalent_seconds"]) / HOURS
        acc["idle_cost"] += f["cost"] or 0
    signals, waits = [], {}
    if not error:
        try:
            signals = service.capacity_signals(end)
            waits = queues.wait_by_queue(billing_collect.metrics_client(), end)
        except (TransientError, PermanentError) as exc:
            error = f"The metrics server could not be queried: {exc}"
    quotas = dict(Quota.objects.values_list("flavor__name").annotate(n=Sum("nominal")))
    flavors = [{"flavor": f, "quota": quotas.get(f.name, 0), **{k: Decimal(v).quantize(Decimal("0.1"))
                for k, v in per_flavor.get(f.name, {}).items()}} for f in Flavor.objects.order_by("name")]
    return render(request, "fleetops/fleet.html", {
        "start": start, "end": end, "flavors": flavors, "findings": findings, "error": error,
        "settings": FleetSettings.current(), "signals": signals,
        "waits": sorted((queue, row) for queue, row in waits.items()),
        "currency": findings[0]["currency"] if findings else "",
        "health": health_summary(),
    })


@login_required
def tenant_page(request: HttpRequest, slug: str) -> HttpResponse:
    tenant = Tenant.objects.for_user(request.user).filter(slug=slug).first()
    if tenant is None:
        raise Http404("no such tenant")
    start, end = _window(request)
    util, findings, error = _measure(start, end, [tenant.slug])
    endpoints = {e.deployment: e for e in InferenceEndpoint.objects.filter(tenant=tenant).select_related("tier")}
    for finding in findings:  # inference endpoints: link the tier's scale-to-zero settings
        finding["endpoint"] = next((e for d, e in endpoints.items() if finding["pod"].startswith(f"{d}-")), None)
    return render(request, "fleetops/tenant.html", {
        "tenant": tenant, "start": start, "end": end, "utilisation": util, "findings": findings, "error": error,
        "notices": IdleNotice.objects.for_user(request.user).filter(tenant=tenant)[:20],
    })


@login_required
def numbers(request: HttpRequest, kind: str) -> HttpResponse:
    """The numbers behind a page's figures as CSV (idle findings or utilisation), scoped like the pages."""
    visible = service.visible_tenants(request.user)
    slug = request.GET.get("tenant")
    if slug and visible is not None and slug not in visible:
        raise Http404("no such tenant")
    tenants = [slug] if slug else visible
    if tenants is None and not is_platform_admin(request.user):
        raise PermissionDenied("platform admins only")
    start, end = _window(request)
    try:
        rows = (service.idle_findings(start, end, tenants=tenants) if kind == "idle"
                else service.utilisation(start, end, tenants=tenants))
    except (MeteringInputError, TransientError, PermanentError) as exc:
        # Like the pages: a metrics outage is a message to read, not a server error of the portal.
        return render(request, "fleetops/numbers_unavailable.html", {"error": str(exc), "kind": kind})
    out = io.StringIO()
    if rows:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]), extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    response = HttpResponse(out.getvalue(), content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="fleet-{kind}.csv"'
    return response
