"""Derived prices, the optional idle-cost line, and the thin periodic entry points."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from billing import actions, collect, tasks
from billing.models import Invoice, Price
from gpufleet.core.errors import ActionError
from tenants.models import Tenant
from tests.billing.helpers import catalog, hour, sample, tenants, usage

pytestmark = pytest.mark.django_db


def test_price_derived_from_opencost_gpu_cost_weight_and_markup():
    catalog()
    price = actions.derive_price("a100-3g", "EUR", "2.95", "1.25", "2026-01-01")
    # 2.95 x 0.4286 x 1.25 = 1.5804625 -> 6 decimals, banker's rounding: the tie goes to the even 2
    assert price.per_unit_hour == Decimal("1.580462") and price.source == Price.Source.OPENCOST
    assert (price.opencost_gpu_hourly, price.markup) == (Decimal("2.95"), Decimal("1.25"))
    with pytest.raises(ActionError) as err:
        actions.derive_price("a100-3g", "EUR", "-1", "1.25")
    assert "opencost_gpu_hourly" in err.value.errors and Price.objects.count() == 1


def test_idle_line_is_off_by_default_and_shares_idle_in_proportion(settings):
    flavors = catalog()  # capacity: 8 A100 + 4 x 0.4286 + 8 x 0.25 = 11.7144 GPU-equivalents
    tenants("acme", "globex")
    usage(hour(2026, 9, 1), hour(2026, 10, 1), [sample("acme", flavors["a100"], hour(2026, 9, 1), "3600"),
                                                sample("globex", flavors["a100"], hour(2026, 9, 1), "10800")])
    actions.set_price("a100", "3.00", "USD", "2026-01-01")
    plain = actions.draft_invoice(Tenant.objects.get(slug="acme"), "2026-09")
    assert [line.kind for line in plain.lines.all()] == ["usage"]

    settings.GPUFLEET_BILLING_IDLE_SHARE = True
    acme, globex = actions.draft_all("2026-09")
    capacity = Decimal("11.7144") * 30 * 24 * 3600
    idle = capacity - Decimal(14400)
    acme_idle, globex_idle = acme.lines.get(kind="idle"), globex.lines.get(kind="idle")
    assert acme_idle.gpu_equivalent_seconds == (idle / 4).quantize(Decimal("0.001"))
    assert globex_idle.gpu_equivalent_seconds == (idle * 3 / 4).quantize(Decimal("0.001"))
    assert acme_idle.unit_price == Decimal("3.000000")  # the tenant's own average per GPU-hour
    assert acme.total == Decimal("3.00") + acme_idle.amount


def test_recent_window_waits_for_the_numbers_to_settle(settings):
    settings.GPUFLEET_SCRAPE_INTERVAL = "30"
    # 10:01: the hour 09:00-10:00 settles at 10:02:30 (3 tolerated gaps + 2 scrapes), so it is not yet in.
    assert collect.recent_window(datetime(2026, 11, 2, 10, 1, tzinfo=UTC)) == (
        datetime(2026, 11, 2, 6, tzinfo=UTC), datetime(2026, 11, 2, 9, tzinfo=UTC))
    assert collect.recent_window(datetime(2026, 11, 2, 10, 5, tzinfo=UTC))[1] == datetime(2026, 11, 2, 10, tzinfo=UTC)


def test_monthly_task_drafts_last_month():
    flavors = catalog()
    tenants("acme")
    now = datetime.now(UTC)
    first = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    previous = (first - timedelta(days=1)).replace(day=1)
    usage(previous, first, [sample("acme", flavors["a100"], previous, "3600")])
    actions.set_price("a100", "1.00", "USD", "2020-01-01")
    assert tasks.draft_previous_month() == 1
    assert Invoice.objects.get().period == previous.date()


def test_beat_collects_hourly_and_drafts_on_the_first():
    from gpufleet.celery import app

    app.finalize()
    schedule = {entry["task"]: entry["schedule"] for entry in app.conf.beat_schedule.values()}
    hourly, monthly = schedule["billing.collect_recent"], schedule["billing.draft_previous_month"]
    assert hourly.minute == {5} and len(hourly.hour) == 24
    assert monthly.day_of_month == {1} and monthly.hour == {1}


def test_void_and_reissue_from_the_cli():
    import io
    import json

    from django.core.management import call_command
    from django.core.management.base import CommandError

    def run(*args):
        out = io.StringIO()
        call_command(*args, stdout=out, stderr=io.StringIO())
        return json.loads(out.getvalue())

    flavors = catalog()
    tenants("acme")
    usage(hour(2026, 9, 1), hour(2026, 10, 1), [sample("acme", flavors["a100"], hour(2026, 9, 2), "7200")])
    actions.set_price("a100", "1.50", "USD", "2026-01-01")
    (final,) = run("billing", "invoices", "--period", "2026-09", "--finalize", "--yes")
    with pytest.raises(CommandError, match="no invoice"):
        run("billing", "void", "--number", "GF-1999-000001", "--reason", "x")
    void = run("billing", "void", "--number", final["number"], "--reason", "customer dispute")
    assert void["state"] == "void" and void["number"] == final["number"]
    new = run("billing", "reissue", "--number", final["number"])
    assert new["state"] == "draft" and new["replaces"] == final["number"] and new["total"] == "3.00"
