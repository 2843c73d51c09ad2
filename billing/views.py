"""Billing pages: usage by day and flavor (tenant members), invoices (tenant owners, billing admins),
reconciliation and exports (billing admins). Scoped querysets: other tenants' rows are 404s."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import Max
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_POST

from gpufleet import clock
from gpufleet.accounts.roles import is_billing_admin
from gpufleet.core.errors import ActionError, Conflict
from infra.errors import PermanentError, TransientError
from tenants.models import Tenant

from . import actions, charts, exports, opencost_source, reconciliation
from .forms import FinalizeForm, VoidForm
from .models import Invoice, UsageRecord
from .periods import parse_period, period_bounds
from .usage_view import daily_usage, gpu_hours_matrix

GPU_HOURS_QUANTUM = Decimal("0.001")
INVOICES_PER_PAGE = 50


def _period(request: HttpRequest, latest: date | None = None) -> date:
    """The month asked for, else the latest month that has data (`latest`), else the current month:
    a page opened from the navigation shows figures, not an empty month that has just begun."""
    value = request.GET.get("period") or (latest or clock.now()).strftime("%Y-%m")
    try:
        return parse_period(value)
    except ActionError as exc:
        raise Http404(exc.errors["period"][0]) from exc


def latest_usage_month(records: Any) -> date | None:
    """First day of the month of the newest usage row in `records` (a scoped queryset), or None."""
    newest = records.aggregate(newest=Max("hour"))["newest"]
    return newest.date().replace(day=1) if newest else None


def latest_invoice_month(invoices: Any) -> date | None:
    return invoices.aggregate(newest=Max("period"))["newest"]


def _billing_admin(request: HttpRequest) -> None:
    if not is_billing_admin(request.user):
        raise PermissionDenied


@login_required
def usage(request: HttpRequest, slug: str) -> HttpResponse:
    tenant = get_object_or_404(Tenant.objects.for_user(request.user), slug=slug)
    records = UsageRecord.objects.for_user(request.user)
    period = _period(request, latest_usage_month(records.filter(tenant=tenant)))
    data = daily_usage(records, tenant.pk, period)
    matrix = gpu_hours_matrix(data)
    chart = charts.stacked_bars(data["days"], matrix, title=f"{tenant.slug}: GPU-equivalent hours per day, "
                                f"{period:%Y-%m}", unit="GPU-hours")
    totals = [{"flavor": f, "gpu_hours": sum(values).quantize(GPU_HOURS_QUANTUM)} for f, values in matrix.items()]
    # One row per day with a column per flavor (a month is at most 31 rows, not days x flavors), days
    # without usage left out.
    by_day = [{"day": day, "hours": [matrix[f][i] for f in matrix]} for i, day in enumerate(data["days"])
              if any(matrix[f][i] for f in matrix)]
    return render(request, "billing/usage.html", {
        "tenant": tenant, "period": period, "chart": mark_safe(chart),  # noqa: S308 - built by charts, escaped
        "rows": data["rows"], "totals": totals, "flavors": list(matrix), "by_day": by_day,
    })


@login_required
def invoice_list(request: HttpRequest) -> HttpResponse:
    invoices = Invoice.objects.for_user(request.user).select_related("tenant")
    page = Paginator(invoices, INVOICES_PER_PAGE).get_page(request.GET.get("page"))
    return render(request, "billing/invoice_list.html", {"invoices": page.object_list, "page_obj": page})


@login_required
def invoice_detail(request: HttpRequest, pk: int) -> HttpResponse:
    return _invoice_page(request, pk)


def _invoice_page(request: HttpRequest, pk: int, *, finalize_form: FinalizeForm | None = None,
                  void_form: VoidForm | None = None, status: int = 200) -> HttpResponse:
    invoice = get_object_or_404(Invoice.objects.for_user(request.user).select_related("tenant", "replaces"), pk=pk)
    admin = is_billing_admin(request.user)
    return render(request, "billing/invoice_detail.html", {
        "invoice": invoice, "lines": invoice.lines.select_related("adjusts", "flavor"),
        "reissued_as": Invoice.objects.filter(replaces=invoice).first(),
        "finalize_form": (finalize_form or FinalizeForm()) if admin and invoice.state == Invoice.State.DRAFT else None,
        "void_form": (void_form or VoidForm()) if admin and invoice.state == Invoice.State.FINALIZED else None,
        "can_reissue": admin and invoice.state == Invoice.State.VOID,
    }, status=status)


def _scoped_invoice_for_admin(request: HttpRequest, pk: int) -> Invoice:
    # Out of scope is a 404 (as on every page); in scope but not a billing admin is a 403.
    invoice = get_object_or_404(Invoice.objects.for_user(request.user), pk=pk)
    _billing_admin(request)
    return invoice


def _action_failed(form: Any, exc: ActionError) -> int:
    """Put the action's reasons next to their fields; the status to answer with (409 for a conflict)."""
    for field, reasons in exc.errors.items():
        for reason in reasons:
            form.add_error(field if field in form.fields else None, reason if field in form.fields or not field
                           else f"{field}: {reason}")
    return 409 if isinstance(exc, Conflict) else 400


@login_required
@require_POST
def invoice_finalize(request: HttpRequest, pk: int) -> HttpResponse:
    invoice = _scoped_invoice_for_admin(request, pk)
    form, status = FinalizeForm(request.POST), 400
    if form.is_valid():
        try:
            done = actions.finalize(invoice.pk)
        except ActionError as exc:
            status = _action_failed(form, exc)
        else:
            messages.success(request, f"Invoice {done.number} is finalized: it is in the finance exports of "
                                      f"{done.period:%B %Y}.")
            return redirect("billing:invoice-detail", pk=done.pk)
    return _invoice_page(request, pk, finalize_form=form, status=status)


@login_required
@require_POST
def invoice_void(request: HttpRequest, pk: int) -> HttpResponse:
    invoice = _scoped_invoice_for_admin(request, pk)
    form, status = VoidForm(request.POST), 400
    if form.is_valid():
        try:
            done = actions.void(invoice.pk, form.cleaned_data["reason"])
        except ActionError as exc:
            status = _action_failed(form, exc)
        else:
            messages.success(request, f"Invoice {done.number} is void. Reissue it to bill the month again.")
            return redirect("billing:invoice-detail", pk=done.pk)
    return _invoice_page(request, pk, void_form=form, status=status)


@login_required
@require_POST
def invoice_reissue(request: HttpRequest, pk: int) -> HttpResponse:
    invoice = _scoped_invoice_for_admin(request, pk)
    try:
        new = actions.reissue(invoice.pk)
    except ActionError as exc:
        messages.error(request, "; ".join(reason for reasons in exc.errors.values() for reason in reasons))
        return redirect("billing:invoice-detail", pk=invoice.pk)
    messages.success(request, f"A new draft replaces {invoice.number}; check it and finalize it.")
    return redirect("billing:invoice-detail", pk=new.pk)


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
    period = _period(request, latest_usage_month(UsageRecord.objects.all()))
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
    finalized = Invoice.objects.filter(state=Invoice.State.FINALIZED)
    period = _period(request, latest_invoice_month(finalized) or latest_invoice_month(Invoice.objects.all()))
    fmt = request.GET.get("as")
    if fmt is None:
        # Only finalized invoices are exported: say so, and point at the drafts that would fill the export.
        drafts = Invoice.objects.filter(period=period, state=Invoice.State.DRAFT).select_related("tenant")
        return render(request, "billing/exports.html", {"period": period, "formats": exports.FORMATS,
                                                        "count": len(exports.invoices_for(period)),
                                                        "drafts": list(drafts)})
    if fmt not in exports.FORMATS:
        raise Http404("unknown export format")
    content, media = exports.export(period, fmt)
    response = HttpResponse(content, content_type=media)
    response["Content-Disposition"] = (f'attachment; filename="invoices-{period:%Y-%m}.'
                                       f'{"focus.csv" if fmt == "focus" else fmt}"')
    return response

