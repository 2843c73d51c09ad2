"""The CLI (names fixed by the issue), the three exports, and reconciliation flags."""

from __future__ import annotations

import csv
import io
import json
from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from billing import exports, reconciliation
from billing.models import Invoice, Price
from billing.reconciliation import Measured, OpenCostView
from tests.billing.helpers import catalog, hour, hours, sample, tenants, usage

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


@pytest.fixture
def month(settings):
    """Two tenants with October usage in every flavor, priced in USD."""
    flavors = catalog()
    tenants("acme", "globex")
    samples = [sample("acme", flavors["a100"], at, "3600") for at in hours(hour(2026, 10, 31, 20), 4)]
    samples += [sample("acme", flavors["a100-3g"], hour(2026, 10, 5, 1), "1800"),
                sample("acme", flavors["a100-share25"], hour(2026, 10, 5, 1), "900.5"),
                sample("globex", flavors["a100"], hour(2026, 10, 9, 9), "10800")]
    usage(hour(2026, 10, 1), hour(2026, 11, 1), samples)
    for flavor, amount in (("a100", "2.40"), ("a100-3g", "1.10"), ("a100-share25", "0.70")):
        run("price", "set", "--flavor", flavor, "--per-unit-hour", amount, "--currency", "USD", "--from",
            "2026-01-01")
    return flavors


def test_usage_json_reproduces_seconds_exactly(month):
    out = run("billing", "usage", "--tenant", "acme", "--start", "2026-10-01T00:00:00Z",
              "--end", "2026-11-01T00:00:00Z", "--json")
    assert json.loads(out) == [
        {"flavor": "a100", "unit_seconds": 14400, "gpu_equivalent_seconds": 14400},
        {"flavor": "a100-3g", "unit_seconds": 1800, "gpu_equivalent_seconds": 771.48},
        {"flavor": "a100-share25", "unit_seconds": 900.5, "gpu_equivalent_seconds": 225.125},
    ]
    # A window boundary inside the month cuts at the hour.
    out = run("billing", "usage", "--tenant", "acme", "--start", "2026-10-31T22:00:00Z",
              "--end", "2026-11-01T00:00:00Z", "--json")
    assert json.loads(out) == [{"flavor": "a100", "unit_seconds": 7200, "gpu_equivalent_seconds": 7200}]


def test_cli_errors_are_clear(month):
    with pytest.raises(CommandError, match="unknown flavor"):
        run("price", "set", "--flavor", "nope", "--per-unit-hour", "1", "--currency", "USD")
    with pytest.raises(CommandError, match="must not be negative"):
        run("price", "set", "--flavor", "a100", "--per-unit-hour", "-2", "--currency", "USD")
    with pytest.raises(CommandError, match="unknown currency"):
        run("price", "set", "--flavor", "a100", "--per-unit-hour", "2", "--currency", "ZZZ")
    with pytest.raises(CommandError, match="overlaps"):
        run("price", "set", "--flavor", "a100", "--per-unit-hour", "2", "--currency", "USD", "--from", "2026-01-01")
    with pytest.raises(CommandError, match="in the future"):
        run("billing", "invoices", "--period", "2030-01")
    with pytest.raises(CommandError, match="whole hour"):
        run("billing", "usage", "--tenant", "acme", "--start", "2026-10-01T00:30:00Z", "--end", "2026-11-01", "--json")
    with pytest.raises(CommandError, match="no tenant"):
        run("billing", "usage", "--tenant", "nobody", "--start", "2026-10-01", "--end", "2026-11-01", "--json")
    assert Price.objects.count() == 3 and Invoice.objects.count() == 0


def test_invoices_finalize_and_exports(month, tmp_path: Path):
    drafted = json.loads(run("billing", "invoices", "--period", "2026-10"))
    assert [(i["tenant"], i["state"], i["total"]) for i in drafted] == [
        # acme: 4 h x 2.40 = 9.60; 0.5 h x 1.10 = 0.55; 900.5 s x 0.70 / 3600 = 0.17509.. -> 0.18
        ("acme", "draft", "10.33"), ("globex", "draft", "7.20")]
    assert exports.invoices_for(date(2026, 10, 1)) == []  # drafts are not exported
    final = json.loads(run("billing", "invoices", "--period", "2026-10", "--finalize", "--yes"))
    assert sorted(i["number"][-6:] for i in final) == ["000001", "000002"]
    # Finalized invoices cannot change through the CLI either: drafting again returns them as they are.
    again = json.loads(run("billing", "invoices", "--period", "2026-10", "--finalize", "--yes"))
    assert [i["content_hash"] for i in again] == [i["content_hash"] for i in final]

    lines = list(csv.DictReader(io.StringIO(run("billing", "export", "--period", "2026-10", "--format", "csv"))))
    assert len(lines) == 4 and all(row["invoice_number"] and row["tenant"] for row in lines)
    assert list(lines[0]) == exports.CSV_COLUMNS
    assert sum(Decimal(row["amount"]) for row in lines) == Decimal("17.53")

    data = json.loads(run("billing", "export", "--period", "2026-10", "--format", "json"))
    assert [len(inv["lines"]) for inv in data] == [3, 1]

    out = tmp_path / "focus.csv"
    run("billing", "export", "--period", "2026-10", "--format", "focus", "--out", str(out))
    focus = list(csv.DictReader(io.StringIO(out.read_text())))
    assert len(focus) == 4
    assert set(exports.FOCUS_MANDATORY) <= set(focus[0])
    for row in focus:
        assert row["InvoiceId"] and row["BillingAccountId"] in {"acme", "globex"}
        assert row["BillingPeriodStart"] == "2026-10-01T00:00:00Z" and row["BillingPeriodEnd"] == "2026-11-01T00:00:00Z"
        assert row["BilledCost"] == row["EffectiveCost"] and row["BillingCurrency"] == "USD"
        assert row["ChargeCategory"] == "Usage" and row["ServiceCategory"] == "Compute"
    assert sum(Decimal(row["BilledCost"]) for row in focus) == Decimal("17.53")


def test_reconciliation_flags_and_causes():
    tol, floor = Decimal("0.05"), Decimal("0.5")
    rows = {r.tenant: r for r in reconciliation.rows(
        {
            "exact": Measured(whole=Decimal(36000)),
            "shares": Measured(hami=Decimal(9000)),            # 2.5 GPU-h measured, OpenCost says 10
            "mig": Measured(whole=Decimal(3600), mig=Decimal(36000)),
            "idle-requests": Measured(whole=Decimal(3600)),
            "noise": Measured(whole=Decimal(36000)),
        },
        {
            "tenant-exact": OpenCostView(Decimal("10"), Decimal("9.5")),
            "tenant-shares": OpenCostView(Decimal("10"), Decimal("9.5")),
            "tenant-mig": OpenCostView(Decimal("1"), Decimal("0.95")),
            "tenant-idle-requests": OpenCostView(Decimal("24"), Decimal("22.8")),
            "tenant-noise": OpenCostView(Decimal("10.3"), Decimal("9.8")),
            "tenant-ghost": OpenCostView(Decimal("5"), Decimal("4.75")),
            "kube-system": OpenCostView(Decimal("3"), Decimal("2")),
        }, tolerance=tol, min_gpu_hours=floor)}
    assert set(rows) == {"exact", "shares", "mig", "idle-requests", "noise", "ghost"}
    assert not rows["exact"].flagged and rows["exact"].delta_gpu_hours == 0
    assert rows["shares"].flagged and rows["shares"].causes == ["hami_counted_whole"]
    assert rows["shares"].delta_gpu_hours == Decimal("7.5")
    assert rows["mig"].flagged and rows["mig"].causes == ["mig_unsupported"]
    assert rows["idle-requests"].causes == ["requests_never_used"]
    assert not rows["noise"].flagged  # 3% is within tolerance
    assert rows["ghost"].flagged and rows["ghost"].measured_gpu_hours == 0


def test_reconcile_cli_without_opencost_lists_measured(month):
    rows = json.loads(run("billing", "reconcile", "--period", "2026-10"))
    assert [r["tenant"] for r in rows] == ["acme", "globex"]
    assert rows[1]["measured_gpu_hours"] == "3.000" and rows[1]["opencost_gpu_hours"] is None
    assert not any(r["flagged"] for r in rows)  # no OpenCost configured: nothing to disagree with
