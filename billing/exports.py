"""Finance exports of finalized invoices: CSV of lines, JSON, and FOCUS 1.2 CSV.

Every row carries the invoice number and the tenant. Only finalized invoices are exported (drafts
can still change; void ones were replaced by their reissue). Reads only.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from gpufleet.core import conf

from .models import Invoice, InvoiceLine
from .periods import period_bounds

FORMATS = ("csv", "json", "focus")

CSV_COLUMNS = [
    "invoice_number", "tenant", "period", "currency", "position", "kind", "flavor", "cluster", "region",
    "region_name", "availability_zone", "description",
    "charge_start", "charge_end", "quantity_unit_hours", "unit_price", "amount", "unit_seconds",
    "gpu_equivalent_seconds", "billed_unit_seconds", "measured_unit_seconds", "adjusts_invoice",
    "invoice_total", "content_hash",
]

# FOCUS 1.2 (FinOps Open Cost and Usage Specification): the 21 mandatory columns, then the
# conditional/recommended ones we can fill, then x_ custom columns (allowed by the spec).
FOCUS_MANDATORY = [
    "BilledCost", "BillingAccountId", "BillingAccountName", "BillingCurrency", "BillingPeriodEnd",
    "BillingPeriodStart", "ChargeCategory", "ChargeClass", "ChargeDescription", "ChargePeriodEnd",
    "ChargePeriodStart", "ContractedCost", "EffectiveCost", "InvoiceIssuerName", "ListCost",
    "PricingQuantity", "PricingUnit", "ProviderName", "PublisherName", "ServiceCategory", "ServiceName",
]
FOCUS_OPTIONAL = [
    "AvailabilityZone", "BillingAccountType", "ChargeFrequency", "ConsumedQuantity", "ConsumedUnit",
    "ContractedUnitPrice",
    "InvoiceId", "ListUnitPrice", "PricingCategory", "PricingCurrency", "RegionId", "RegionName",
    "ResourceId", "ResourceName", "ResourceType", "ServiceSubcategory", "SkuId", "SkuPriceId",
    "SubAccountId", "SubAccountName", "SubAccountType", "Tags",
]
FOCUS_CUSTOM = ["x_Cluster", "x_GpuEquivalentSeconds", "x_MeasuredUnitSeconds", "x_AdjustsInvoiceId"]
FOCUS_COLUMNS = FOCUS_MANDATORY + FOCUS_OPTIONAL + FOCUS_CUSTOM

# Re-measured usage of a finalized period stays a Usage charge; ChargeClass=Correction marks it.
CHARGE_CATEGORY = {"usage": "Usage", "adjustment": "Usage", "idle": "Usage"}


def invoices_for(period: date, tenant_slug: str | None = None) -> list[Invoice]:
    qs = Invoice.objects.filter(period=period, state=Invoice.State.FINALIZED).select_related("tenant")
    if tenant_slug:
        qs = qs.filter(tenant__slug=tenant_slug)
    return list(qs.order_by("number").prefetch_related("lines__adjusts"))


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, Decimal):
        return format(value, "f")
    return str(value)


def _lines(invoices: Iterable[Invoice]) -> Iterable[tuple[Invoice, InvoiceLine]]:
    for invoice in invoices:
        for line in invoice.lines.all():
            yield invoice, line


def to_csv(invoices: Iterable[Invoice]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for inv, ln in _lines(invoices):
        writer.writerow([_text(v) for v in (
            inv.number, inv.tenant.slug, inv.period_label, inv.currency, ln.position, ln.kind, ln.flavor_name,
            ln.cluster_name, ln.region, ln.region_name, ln.availability_zone, ln.description,
            _iso(ln.charge_start), _iso(ln.charge_end), ln.quantity, ln.unit_price, ln.amount,
            ln.unit_seconds, ln.gpu_equivalent_seconds, ln.billed_unit_seconds, ln.measured_unit_seconds,
            ln.adjusts.number if ln.adjusts_id else None, inv.total, inv.content_hash,
        )])
    return out.getvalue()


def invoice_json(inv: Invoice) -> dict[str, Any]:
    return {
        "number": inv.number, "tenant": inv.tenant.slug, "period": inv.period_label, "currency": inv.currency,
        "state": inv.state, "subtotal": _text(inv.subtotal), "total": _text(inv.total),
        "finalized_at": inv.finalized_at.isoformat() if inv.finalized_at else None,
        "content_hash": inv.content_hash,
        "opencost": {"cost": _text(inv.opencost_cost) or None, "gpu_hours": _text(inv.opencost_gpu_hours) or None},
        "replaces": inv.replaces.number if inv.replaces_id else None,  # type: ignore[union-attr]
        "lines": [
            {"position": ln.position, "kind": ln.kind, "flavor": ln.flavor_name,
             "cluster": ln.cluster_name or None, "region": ln.region or None, "region_name": ln.region_name or None,
             "availability_zone": ln.availability_zone or None, "description": ln.description,
             "charge_start": _iso(ln.charge_start), "charge_end": _iso(ln.charge_end),
             "quantity_unit_hours": _text(ln.quantity), "unit_price": _text(ln.unit_price),
             "amount": _text(ln.amount), "unit_seconds": _text(ln.unit_seconds),
             "gpu_equivalent_seconds": _text(ln.gpu_equivalent_seconds),
             "billed_unit_seconds": _text(ln.billed_unit_seconds) or None,
             "measured_unit_seconds": _text(ln.measured_unit_seconds) or None,
             "adjusts_invoice": ln.adjusts.number if ln.adjusts_id else None}
            for ln in inv.lines.all()
        ],
    }


def to_json(invoices: Iterable[Invoice]) -> str:
    # Amounts are strings: JSON numbers would turn exact decimals into binary floats.
    return json.dumps([invoice_json(inv) for inv in invoices], indent=2)


def focus_rows(invoices: Iterable[Invoice]) -> list[dict[str, str]]:
    provider = conf.BILLING_PROVIDER_NAME
    rows = []
    for inv, ln in _lines(invoices):
        start, end = period_bounds(inv.period)
        correction = ln.kind == "adjustment"
        cost = _text(ln.amount)
        rows.append({
            "BilledCost": cost, "EffectiveCost": cost, "ListCost": cost, "ContractedCost": cost,
            "BillingAccountId": inv.tenant.slug, "BillingAccountName": inv.tenant.display_name,
            "BillingAccountType": "Tenant",
            "BillingCurrency": inv.currency, "PricingCurrency": inv.currency,
            "BillingPeriodStart": _iso(start), "BillingPeriodEnd": _iso(end),
            "ChargePeriodStart": _iso(ln.charge_start), "ChargePeriodEnd": _iso(ln.charge_end),
            "ChargeCategory": CHARGE_CATEGORY[ln.kind],
            # FOCUS: "Correction" marks a row that corrects a charge of an earlier billing period.
            "ChargeClass": "Correction" if correction else "",
            "ChargeDescription": ln.description, "ChargeFrequency": "Usage-Based",
            "ConsumedQuantity": _text(ln.quantity), "ConsumedUnit": "Unit-Hours" if ln.flavor_name else "GPU-Hours",
            "PricingQuantity": _text(ln.quantity), "PricingUnit": "Unit-Hours" if ln.flavor_name else "GPU-Hours",
            "PricingCategory": "Standard",
            "ListUnitPrice": _text(ln.unit_price), "ContractedUnitPrice": _text(ln.unit_price),
            "InvoiceId": inv.number or "", "InvoiceIssuerName": provider, "ProviderName": provider,
            "PublisherName": provider,
            # Where the usage ran: the cluster's region (and its zone when it has exactly one).
            "RegionId": ln.region, "RegionName": ln.region_name, "AvailabilityZone": ln.availability_zone,
            "ResourceId": "/".join(filter(None, (ln.cluster_name, inv.tenant.namespace, ln.flavor_name or "idle"))),
            "ResourceName": ln.flavor_name or "fleet idle share", "ResourceType": "GPU",
            "ServiceCategory": "Compute", "ServiceName": "GPU Compute",
            "ServiceSubcategory": "Containers",
            "SkuId": ln.flavor_name or "idle", "SkuPriceId": str(ln.price_id or ""),
            "SubAccountId": inv.tenant.namespace, "SubAccountName": inv.tenant.display_name,
            "SubAccountType": "Namespace",
            "Tags": json.dumps({"gpufleet.io/tenant": inv.tenant.slug, "gpufleet.io/line-kind": ln.kind,
                                **({"gpufleet.io/cluster": ln.cluster_name} if ln.cluster_name else {})},
                               sort_keys=True),
            "x_Cluster": ln.cluster_name,
            "x_GpuEquivalentSeconds": _text(ln.gpu_equivalent_seconds),
            "x_MeasuredUnitSeconds": _text(ln.unit_seconds),
            "x_AdjustsInvoiceId": ln.adjusts.number if ln.adjusts_id else "",
        })
    return rows


def to_focus(invoices: Iterable[Invoice]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=FOCUS_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(focus_rows(invoices))
    return out.getvalue()


def export(period: date, fmt: str, tenant_slug: str | None = None) -> tuple[str, str]:
    """(content, media type) for a month's finalized invoices."""
    invoices = invoices_for(period, tenant_slug)
    if fmt == "csv":
        return to_csv(invoices), "text/csv"
    if fmt == "json":
        return to_json(invoices), "application/json"
    if fmt == "focus":
        return to_focus(invoices), "text/csv"
    raise ValueError(f"format must be one of {', '.join(FORMATS)}")
