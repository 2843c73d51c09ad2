"""Portal pages of fleet operations: the admin fleet page and a tenant's utilisation and idle findings.

Both measure month-to-date in the TSDB when opened; a metrics outage shows a message, not an error page."""

from __future__ import annotations

import csv
import io
import logging
from collections import defaultdict
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest, PermissionDenied
from django.db.models import Sum
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.safestring import mark_safe

from billing import charts, metrics_source, trends
from billing import collect as billing_collect
from billing.metering.usage import MeteringInputError
from billing.models import UsageRecord
from billing.month_to_date import allocation_now
from gpufleet import clock
from gpufleet.accounts.roles import is_platform_admin
from gpufleet.instants import InstantError, parse_instant
from infra.errors import PermanentError, TransientError
from scheduling.figures import flavor_figures
from scheduling.models import Flavor, InferenceEndpoint, Quota
from scheduling.nodehealth.summary import health_summary
from tenants.models import Tenant

from . import queues, service
from .models import FleetSettings, IdleNotice

HOURS = Decimal(3600)
log = logging.getLogger(__name__)


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


def _measure(start: datetime, end: datetime,
             tenants: list[str] | None) -> tuple[list, list, metrics_source.Outage | None]:
    """Utilisation and idle findings, or the source's outage (asked once, before any query)."""
    if outage := metrics_source.outage():
        return [], [], outage
    try:
        return (service.utilisation(start, end, tenants=tenants),
                service.idle_findings(start, end, tenants=tenants), None)
    except (TransientError, PermanentError) as exc:
        log.warning("fleet metrics query failed: %s", exc)  # the query and host go to the log, not the page
        return [], [], metrics_source.failed(exc)
    except MeteringInputError as exc:  # the catalogue cannot be measured (names fields, never hosts)
        return [], [], metrics_source.failed(exc)


def _labels(days: list) -> list[str]:
    return [f"{d:%b} {d.day}" for d in days]


def _fleet_charts(start: datetime, end: datetime, figures: dict) -> list[str]:
    """Allocation (units in use per day, per flavor) and utilisation (% of the flavor's schedulable units),
    from stored usage: they show with the metrics source down too."""
    days, units = trends.daily_units(UsageRecord.objects.all(), start.date(), (end + timedelta(hours=23)).date())
    if not units:
        return []
    use = {f: [None if v is None or not figures.get(f) or not figures[f].schedulable else
               (v * 100 / figures[f].schedulable).quantize(Decimal("0.1")) for v in vs] for f, vs in units.items()}
    allocation = charts.line_chart(_labels(days), units, chart_id="fleet-allocation", unit="units",
                                   title="GPU allocation per day, by flavor",
                                   desc="Average units held over each day's measured hours, per flavor.")
    utilisation = charts.line_chart(_labels(days), use, chart_id="fleet-utilisation", unit="%",
                                    title="Utilisation per day: share of schedulable units in use",
                                    desc="Units in use divided by the flavor's schedulable units "
                                         "(installed plus pool headroom), per day.")
    return [mark_safe(allocation), mark_safe(utilisation)]  # noqa: S308 - billing.charts escapes every text


@login_required
def fleet(request: HttpRequest) -> HttpResponse:
    if not is_platform_admin(request.user):
        raise PermissionDenied("the fleet page is for platform admins")
    start, end = _window(request)
    util, findings, outage = _measure(start, end, None)
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
    if not outage:
        try:
            signals = service.capacity_signals(end)
            waits = queues.wait_by_queue(billing_collect.metrics_client(), end)
        except (TransientError, PermanentError) as exc:
            outage = metrics_source.failed(exc)
    figures = flavor_figures()
    charts_ = _fleet_charts(start, end, figures)
    flavors = [{"flavor": f, "figures": figures[f.name], **{k: Decimal(v).quantize(Decimal("0.1"))
                for k, v in per_flavor.get(f.name, {}).items()}} for f in Flavor.objects.order_by("name")]
    return render(request, "fleetops/fleet.html", {
        "start": start, "end": end, "flavors": flavors, "findings": findings, "outage": outage,
        "settings": FleetSettings.current(), "signals": signals,
        "waits": sorted((queue, row) for queue, row in waits.items()),
        "currency": findings[0]["currency"] if findings else "",
        "health": health_summary(), "charts": charts_,
    })


@login_required
def tenant_page(request: HttpRequest, slug: str) -> HttpResponse:
    tenant = Tenant.objects.for_user(request.user).filter(slug=slug).first()
    if tenant is None:
        raise Http404("no such tenant")
    start, end = _window(request)
    util, findings, outage = _measure(start, end, [tenant.slug])
    endpoints = {e.deployment: e for e in InferenceEndpoint.objects.filter(tenant=tenant).select_related("tier")}
    for finding in findings:  # inference endpoints: link the tier's scale-to-zero settings
        finding["endpoint"] = next((e for d, e in endpoints.items() if finding["pod"].startswith(f"{d}-")), None)
    # "In use now" as the tenant's home shows it (scheduling.figures): stored usage of the newest measured
    # hour, so the two pages agree whatever the TSDB's month-to-date answer (or outage) is.
    in_use = allocation_now(UsageRecord.objects.filter(tenant=tenant))
    quota_charts = _quota_charts(tenant, start, end)
    return render(request, "fleetops/tenant.html", {
        "tenant": tenant, "in_use": in_use, "charts": quota_charts, "start": start, "end": end,
        "utilisation": util, "findings": findings,
        "outage": outage,
        "notices": IdleNotice.objects.for_user(request.user).filter(tenant=tenant)[:20],
    })


def _quota_charts(tenant: Tenant, start: datetime, end: datetime) -> list[str]:
    """Per flavor the tenant holds quota or uses: units in use per day against its nominal quota now."""
    days, units = trends.daily_units(UsageRecord.objects.filter(tenant=tenant), start.date(),
                                     (end + timedelta(hours=23)).date())
    quotas = dict(Quota.objects.filter(tenant=tenant).values_list("flavor__name").annotate(n=Sum("nominal"))
                  .order_by())
    out = []
    for flavor in sorted(set(units) | set(quotas)):
        used = units.get(flavor, [None] * len(days))
        quota = Decimal(quotas.get(flavor, 0))
        out.append(mark_safe(charts.line_chart(  # noqa: S308 - billing.charts escapes every text
            _labels(days), {"in use": used, "quota now": [quota] * len(days)}, dashed=["quota now"],
            chart_id=f"quota-{flavor}", unit="units", title=f"{flavor}: quota and use per day",
            desc=f"{tenant.slug}'s average {flavor} units in use per day against its nominal quota now "
                 f"({quota} units, summed over clusters).")))
    return out


@login_required
def numbers(request: HttpRequest, kind: str) -> HttpResponse:
    """The numbers behind a page's figures as CSV (idle findings or utilisation), scoped like the pages."""
    visible = service.visible_tenants(request.user)
    slug = request.GET.get("tenant")
    if slug and visible is not None and slug not in visible:
        raise Http404("no such tenant")
    tenants = [slug] if slug else visible  # None: who sees every tenant (service.visible_tenants)
    start, end = _window(request)
    # Like the pages: a metrics outage is a message to read, not a server error of the portal.
    if outage := metrics_source.outage():
        return render(request, "fleetops/numbers_unavailable.html", {"outage": outage, "kind": kind})
    try:
        rows = (service.idle_findings(start, end, tenants=tenants) if kind == "idle"
                else service.utilisation(start, end, tenants=tenants))
    except (TransientError, PermanentError, MeteringInputError) as exc:
        return render(request, "fleetops/numbers_unavailable.html",
                      {"outage": metrics_source.failed(exc), "kind": kind})
    out = io.StringIO()
    if rows:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]), extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    response = HttpResponse(out.getvalue(), content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="fleet-{kind}.csv"'
    return response
