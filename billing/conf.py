"""Billing settings. Each is a Django setting when defined there, else read from the environment,
so the billing app carries its own defaults (documented in docs/billing.md)."""

from __future__ import annotations

import os
from decimal import Decimal
from typing import Any

from django.conf import settings

DEFAULTS: dict[str, str] = {
    # Currency of invoices (prices may be entered in any supported one).
    "GPUFLEET_BILLING_CURRENCY": "USD",
    # Supported currencies; all have two minor digits (amounts are quantized to cents).
    "GPUFLEET_CURRENCIES": "USD,EUR,GBP,CHF,CAD,AUD,SEK,NOK,DKK",
    "GPUFLEET_INVOICE_PREFIX": "GF",
    # Share the fleet's idle GPU-hours among tenants in proportion to use (an extra line). Off.
    "GPUFLEET_BILLING_IDLE_SHARE": "0",
    # Reconciliation flags a tenant when |measured - OpenCost| GPU-hours exceeds this fraction...
    "GPUFLEET_RECONCILE_TOLERANCE": "0.05",
    # ... and this many GPU-hours (small absolute differences are noise, not a finding).
    "GPUFLEET_RECONCILE_MIN_GPU_HOURS": "0.5",
    "GPUFLEET_OPENCOST_URL": "",
    "GPUFLEET_METRICS_URL": "",
    # Measuring (billing.metering): scrape interval (s), tolerated missed scrapes, HAMi share rule, and
    # the DCGM metric every attributed GPU and MIG instance reports.
    "GPUFLEET_SCRAPE_INTERVAL": "30",
    "GPUFLEET_MAX_GAP_SCRAPES": "3",
    "GPUFLEET_HAMI_SHARE_RULE": "max",
    "GPUFLEET_USAGE_METRIC": "DCGM_FI_DEV_FB_USED",
    # Several clusters in one TSDB: the external label that names the cluster (Cluster.metrics_label is its value).
    "GPUFLEET_METRICS_CLUSTER_LABEL": "cluster",
    # Range queries (one per day, metrics source and kind) in flight while the rows measured so far are written.
    "GPUFLEET_METERING_CONCURRENCY": "2",
    # The hourly task re-collects this many settled hours each run (replacing, so overlap is harmless).
    "GPUFLEET_COLLECT_LOOKBACK_HOURS": "3",
    # FOCUS ProviderName / InvoiceIssuerName / PublisherName.
    "GPUFLEET_BILLING_PROVIDER_NAME": "gpufleet",
}


def raw(name: str) -> Any:
    if hasattr(settings, name):
        return getattr(settings, name)
    value = os.environ.get(name)
    return DEFAULTS[name] if value in (None, "") else value


def text(name: str) -> str:
    return str(raw(name))


def flag(name: str) -> bool:
    value = raw(name)
    return value if isinstance(value, bool) else str(value).strip().lower() in {"1", "true", "yes", "on"}


def decimal(name: str) -> Decimal:
    return Decimal(str(raw(name)))


def currencies() -> list[str]:
    value = raw("GPUFLEET_CURRENCIES")
    items = value if isinstance(value, list | tuple) else str(value).split(",")
    return [item.strip() for item in items if item.strip()]
