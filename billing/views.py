"""Billing pages: usage by day and flavor (tenant members), invoices (tenant owners, billing admins),
reconciliation and exports (billing admins). Scoped querysets: other tenants' rows are 404s."""

from __future__ import annotations

from decimal import Decimal

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils.safestring import mark_safe

from gpufleet import clock
from gpufleet.accounts.roles import is_billing_admin
from infra.errors import PermanentError, TransientError
from tenants.errors import ActionError
from tenants.models import Tenant

from . import charts, exports, opencost_source, reconciliation
from .models import Invoice, UsageRecord
from .periods import parse_period, period_bounds
from .usage_view import daily_usage, gpu_hours_matrix

GPU_HOURS_QUANTUM = Decimal("0.001")


def _period(request: HttpRequest):  # type: ignore[no-untyped-def]
    value = request.GET.get("period") or clock.now().strftime("%Y-%m")
    try:
        return parse_period(value)
    except ActionError as exc:
        raise Http404(exc.errors["period"][0]) from exc


def _billing_admin(request: HttpRequest) -> None:
    if not is_billing_admin(request.user):
        raise PermissionDenied


@login_required
def usage(request: HttpRequest, slug: str) -> HttpResponse:
    tenant = get_object_or_404(Tenant.objects.for_user(request.user), slug=slug)
    period = _period(request)
    data = daily_usage(UsageRecord.objects.for_user(request.user), tenant.pk, period)
    matrix = gpu_hours_matrix(data)
    chart = charts.stacked_bars(data["days"], matrix, title=f"{tenant.slug}: GPU-equivalent hours per day, "
                                f"{period:%Y-%m}", unit="GPU-hours")
    totals = [{"flavor": f, "gpu_hours": sum(values).quantize(GPU_HOURS_QUANTUM)} for f, values in matrix.items()]
    return render(request, "billing/usage.html", {
        "tenant": tenant, "period": period, "chart": mark_safe(chart),  # noqa: S308 - built by charts, escaped
        "rows": data["rows"], "totals": totals,
    })


@login_required
def invoice_list(request: HttpRequest) -> HttpResponse:
    invoices = Invoice.objects.for_user(request.user).select_related("tenant")
    return render(request, "billing/invoice_list.html", {"invoices": invoices})


@login_required
def invoice_detail(request: HttpRequest, pk: int) -> HttpResponse:
    invoice = get_object_or_404(Invoice.objects.for_user(request.user).select_related("tenant", "replaces"), pk=pk)
    return render(request, "billing/invoice_detail.html", {"invoice": invoice,
                                                            "lines": invoice.lines.select_related("adjusts")})


@login_required
def invoice_download(request: HttpRequest, pk: int, fmt: str) -> HttpResponse:
    invoice = get_object_or_404(Invoice.objects.for_user(request.user), pk=pk)
    content = exports.to_csv([invoice]) if fmt == "csv" else exports.to_json([invoice])
    response = HttpResponse(content, content_type="text/csv" if fmt == "csv" else "application/json")
    name = invoice.number or f"draft-{invoice.tenant.slug}-{invoice.period_label}"
    response["Content-Disposition"] = f'attachment; filename="{name}.{fmt}"'
    return response


@login_required
def reconciliation_report(request: HttpRequest) -> HttpResponse:
    _billing_admin(request)
    period = _period(request)
    start, end = period_bounds(period)
    try:
        views, problem = opencost_source.namespace_views(start, end), ""
    except (TransientError, PermanentError) as exc:
        views, problem = None, f"OpenCost could not be queried: {exc}"
    rows = reconciliation.report(start, end, views) if not problem else []
    return render(request, "billing/reconciliation.html", {"period": period, "rows": rows, "problem": problem,
                                                           "causes": reconciliation.CAUSES,
                                                           "opencost_configured": views is not None,
                                                           "opencost_empty": views is not None and not views},
                  status=503 if problem else 200)


@login_required
def export(request: HttpRequest) -> HttpResponse:
    _billing_admin(request)
    period = _period(request)
    fmt = request.GET.get("as")
    if fmt is None:
        return render(request, "billing/exports.html", {"period": period, "formats": exports.FORMATS,
                                                        "count": len(exports.invoices_for(period))})
    if fmt not in exports.FORMATS:
        raise Http404("unknown export format")
    content, media = exports.export(period, fmt)
    response = HttpResponse(content, content_type=media)
    response["Content-Disposition"] = (f'attachment; filename="invoices-{period:%Y-%m}.'
                                       f'{"focus.csv" if fmt == "focus" else fmt}"')
    return response

