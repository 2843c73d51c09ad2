"""Prices, invoices and their money: exact to the cent, immutable once finalized, gapless numbers."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal

import pytest
from django.db import DatabaseError, connection, transaction

from billing import actions
from billing.models import FinalizedInvoiceError, Invoice, InvoiceLine, Price, UsageRecord
from gpufleet.audit.models import AuditEvent
from gpufleet.core.errors import ActionError
from tests.billing.helpers import catalog, hour, hours, sample, tenants, usage

pytestmark = pytest.mark.django_db


@pytest.fixture
def flavors():
    return catalog()


@pytest.fixture
def acme(flavors):
    return tenants("acme")[0]


def october_usage(flavors, extra_seconds: int = 0) -> None:
    start, end = hour(2026, 10, 1), hour(2026, 11, 1)
    samples = [sample("acme", flavors["a100"], at, "7200") for at in hours(hour(2026, 10, 3, 10), 3)]
    samples.append(sample("acme", flavors["a100-share25"], hour(2026, 10, 31, 23), str(1800 + extra_seconds)))
    usage(start, end, samples)


def test_collecting_a_window_twice_replaces(flavors, acme):
    october_usage(flavors)
    october_usage(flavors)
    assert UsageRecord.objects.count() == 4
    assert sum(r.unit_seconds for r in UsageRecord.objects.all()) == Decimal(3 * 7200 + 1800)


def test_batches_store_each_group_and_hour_once_in_any_sample_order(flavors, acme):
    """Samples of one tenant, flavor and hour add up wherever they stand in a batch (the measurer sends a
    group's hours one after another, other callers need not); two batches with the same hour are refused."""
    tenants("beta")
    at, later = hour(2026, 10, 3, 10), hour(2026, 10, 3, 11)
    interleaved = [sample("acme", flavors["a100"], at, "100"), sample("beta", flavors["a100"], at, "5"),
                   sample("acme", flavors["a100-3g"], at, "7"), sample("acme", flavors["a100"], at, "20"),
                   sample("acme", flavors["a100"], later, "1"), sample("beta", flavors["a100"], at, "6")]
    start, end = hour(2026, 10, 1), hour(2026, 11, 1)
    run = actions.store_usage_batches(start, end, [(interleaved, []),
                                                   ([sample("acme", flavors["a100"], hour(2026, 10, 4), "3")], [])])
    stored = {(r.tenant.slug, r.flavor.name, r.hour): r.unit_seconds for r in UsageRecord.objects.all()}
    assert stored == {("acme", "a100", at): Decimal(120), ("beta", "a100", at): Decimal(11),
                      ("acme", "a100-3g", at): Decimal(7), ("acme", "a100", later): Decimal(1),
                      ("acme", "a100", hour(2026, 10, 4)): Decimal(3)}
    assert run.records == 5 and run.unit_seconds == Decimal(142)
    again = [([sample("acme", flavors["a100"], at, "1")], []), ([sample("acme", flavors["a100"], at, "2")], [])]
    with pytest.raises(ActionError) as err:
        actions.store_usage_batches(start, end, again)
    assert "two batches" in err.value.errors["samples"][0]
    assert UsageRecord.objects.count() == 5  # the failed run changed nothing


def test_stored_seconds_read_back_exactly(flavors, acme):
    """Usage goes to PostgreSQL in COPY's binary format: every value, whatever its exponent, reads back as
    the column stores it (three places)."""
    values = ["0.001", "0.125", "7200", "7200.000", "1801.5", "1234567890.125", "0"]
    start = hour(2026, 10, 1)
    usage(start, hour(2026, 11, 1), [actions.Sample("acme", "a100", start + timedelta(hours=n), Decimal(v), Decimal(v))
                                     for n, v in enumerate(values)])
    stored = UsageRecord.objects.order_by("hour").values_list("unit_seconds", "gpu_equivalent_seconds", "hour")
    assert [(str(u), str(g), at) for u, g, at in stored] == [
        (f"{Decimal(v):.3f}", f"{Decimal(v):.3f}", start + timedelta(hours=n)) for n, v in enumerate(values)]


@pytest.mark.parametrize("values", [["0.0015", "7200.0005", "1801.5", "0.0004"]])
def test_copy_and_its_bulk_create_fallback_store_the_same_rows(flavors, acme, settings, values):
    """gpufleet.core.pgcopy's binary COPY and GPUFLEET_PG_COPY=False (bulk_create) store identical usage rows
    and invoice lines, rounded by the columns alike (docs/adr/0002)."""
    actions.set_price("a100", "2.50", "USD", "2026-01-01")
    start = hour(2026, 10, 1)
    samples = [actions.Sample("acme", "a100", start + timedelta(hours=n), Decimal(v), Decimal(v))
               for n, v in enumerate(values)]
    stored = []
    for copy in (True, False):
        settings.GPUFLEET_PG_COPY = copy
        usage(start, hour(2026, 11, 1), samples)
        invoice = actions.draft_invoice(acme, "2026-10")
        rows = list(UsageRecord.objects.order_by("hour").values_list(
            "tenant_id", "flavor_id", "cluster_id", "hour", "unit_seconds", "gpu_equivalent_seconds",
            "window_start", "window_end"))
        lines = [{k: v for k, v in line.items() if k not in ("id", "invoice_id")}
                 for line in InvoiceLine.objects.filter(invoice=invoice).order_by("position").values()]
        stored.append((rows, lines, invoice.total))
    assert stored[0] == stored[1]
    assert [str(r[4]) for r in stored[0][0]] == ["0.002", "7200.001", "1801.500", "0.000"]  # numeric(.., 3)
    assert stored[0][1] and stored[0][0][0][3].utcoffset() == timedelta(0)


def test_totals_reproduce_to_the_cent_with_bankers_rounding(flavors, acme):
    actions.set_price("a100", "2.50", "USD", "2026-01-01")
    # 1800 s x 0.25 / 3600 = 0.125 exactly: half-even gives 0.12 (half-up would give 0.13).
    actions.set_price("a100-share25", "0.25", "USD", "2026-01-01")
    october_usage(flavors)
    invoice = actions.draft_invoice(acme, "2026-10")
    lines = {line.flavor_name: line for line in invoice.lines.all()}
    assert lines["a100"].quantity == Decimal("6.000000")  # 3 h x 2 GPUs
    assert lines["a100"].amount == Decimal("15.00")
    assert lines["a100-share25"].amount == Decimal("0.12")
    assert lines["a100-share25"].unit_seconds == Decimal(1800)
    assert invoice.total == Decimal("15.12") == sum(line.amount for line in invoice.lines.all())


def test_price_change_mid_month_splits_the_line(flavors, acme):
    actions.set_price("a100", "2.00", "USD", "2026-01-01")
    actions.set_price("a100", "3.00", "USD", "2026-10-03")  # closes the first price on 10-03
    usage(hour(2026, 10, 1), hour(2026, 11, 1), [
        sample("acme", flavors["a100"], hour(2026, 10, 2, 5), "3600"),
        sample("acme", flavors["a100"], hour(2026, 10, 3, 5), "3600"),
    ])
    invoice = actions.draft_invoice(acme, "2026-10")
    assert [(ln.unit_price, ln.amount) for ln in invoice.lines.all()] == [
        (Decimal("2.000000"), Decimal("2.00")), (Decimal("3.000000"), Decimal("3.00"))]
    assert Price.objects.get(per_unit_hour=Decimal(2)).effective_to == date(2026, 10, 3)


def test_drafting_is_idempotent(flavors, acme):
    actions.set_price("a100", "2.50", "USD", "2026-01-01")
    actions.set_price("a100-share25", "0.25", "USD", "2026-01-01")
    october_usage(flavors)
    first = actions.draft_invoice(acme, "2026-10")
    lines = list(first.lines.values_list("flavor_name", "quantity", "amount"))
    second = actions.draft_invoice(acme, "2026-10")
    assert second.pk == first.pk and Invoice.objects.count() == 1
    assert list(second.lines.values_list("flavor_name", "quantity", "amount")) == lines


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"flavor": "no-such-flavor"}, "flavor"),
    ({"currency": "XYZ"}, "currency"),
    ({"currency": "usd"}, "currency"),
    ({"per_unit_hour": "-1"}, "per_unit_hour"),
    ({"per_unit_hour": "abc"}, "per_unit_hour"),
    ({"per_unit_hour": "NaN"}, "per_unit_hour"),
    ({"effective_from": "2026-13-01"}, "effective_from"),
    ({"effective_from": "2026-03-01"}, "effective_from"),  # inside the existing closed range
    ({"effective_from": "2026-02-01"}, "effective_from"),  # on an existing start
])
def test_bad_price_input_is_a_clear_error_and_writes_nothing(flavors, kwargs, field):
    actions.set_price("a100", "1.00", "USD", "2026-02-01")
    actions.set_price("a100", "1.50", "USD", "2026-06-01")
    prices, events = list(Price.objects.values()), AuditEvent.objects.count()
    args = {"flavor": "a100", "per_unit_hour": "2.00", "currency": "USD", "effective_from": "2026-08-01"} | kwargs
    with pytest.raises(ActionError) as err:
        actions.set_price(**args)
    assert field in err.value.errors
    assert list(Price.objects.values()) == prices and AuditEvent.objects.count() == events


def test_period_in_the_future_or_malformed_is_refused(flavors, acme):
    for period, reason in (("2027-01", "future"), ("2026-13", "month like"), ("next", "month like")):
        with pytest.raises(ActionError) as err:
            actions.draft_invoice(acme, period)
        assert reason in err.value.errors["period"][0]
    assert Invoice.objects.count() == 0


def test_usage_without_a_price_is_refused(flavors, acme):
    october_usage(flavors)
    with pytest.raises(ActionError) as err:
        actions.draft_invoice(acme, "2026-10")
    assert "a100" in err.value.errors["price"][0]
    assert Invoice.objects.count() == 0 and InvoiceLine.objects.count() == 0


def test_usage_without_a_price_names_each_unpriced_day(flavors, acme):
    """Drafting sums a month between price changes, but usage no price covers is still named day by day."""
    actions.set_price("a100", "2.00", "USD", "2026-10-15")
    usage(hour(2026, 10, 1), hour(2026, 11, 1), [
        sample("acme", flavors["a100"], at, "3600")
        for at in (hour(2026, 10, 2, 5), hour(2026, 10, 2, 6), hour(2026, 10, 5, 1), hour(2026, 10, 20, 3))])
    with pytest.raises(ActionError) as err:
        actions.draft_invoice(acme, "2026-10")
    assert err.value.errors["price"] == ["no USD price for a100 on 2026-10-02, a100 on 2026-10-05 (tenant acme)"]
    assert Invoice.objects.count() == 0


@pytest.fixture
def finalized(flavors, acme):
    actions.set_price("a100", "2.50", "USD", "2026-01-01")
    actions.set_price("a100-share25", "0.25", "USD", "2026-01-01")
    october_usage(flavors)
    return actions.finalize(actions.draft_invoice(acme, "2026-10").pk)


def test_finalize_numbers_and_hashes(finalized):
    assert finalized.state == "finalized"
    assert finalized.number == f"GF-{finalized.finalized_at.year}-000001"
    assert len(finalized.content_hash) == 64
    again = actions.finalize(finalized.pk)
    assert again.number == finalized.number and again.content_hash == finalized.content_hash


def test_a_finalized_invoice_cannot_change_through_the_model_or_queryset(finalized):
    finalized.total = Decimal("0.01")
    with pytest.raises(FinalizedInvoiceError):
        finalized.save()
    with pytest.raises(FinalizedInvoiceError):
        Invoice.objects.filter(pk=finalized.pk).update(total=Decimal(0))
    line = finalized.lines.first()
    line.amount = Decimal(0)
    with pytest.raises(FinalizedInvoiceError):
        line.save()
    with pytest.raises(FinalizedInvoiceError):
        InvoiceLine.objects.filter(invoice=finalized).update(amount=Decimal(0))
    with pytest.raises(FinalizedInvoiceError):
        finalized.delete()
    # Redrafting returns the finalized invoice unchanged.
    assert actions.draft_invoice(finalized.tenant, "2026-10").content_hash == finalized.content_hash


@pytest.mark.parametrize("sql", [
    "UPDATE billing_invoice SET total = 0 WHERE id = %s",
    "UPDATE billing_invoiceline SET amount = 0 WHERE invoice_id = %s",
    "DELETE FROM billing_invoiceline WHERE invoice_id = %s",
    "DELETE FROM billing_invoice WHERE id = %s",
])
def test_the_database_refuses_raw_changes_to_a_finalized_invoice(finalized, sql):
    with pytest.raises(DatabaseError, match="cannot be"), transaction.atomic(), connection.cursor() as cur:
        cur.execute(sql, [finalized.pk])
    finalized.refresh_from_db()
    assert finalized.total == Decimal("15.12") and finalized.lines.count() == 2


def test_void_reissue_and_gapless_numbers(finalized, flavors):
    with pytest.raises(ActionError) as err:
        actions.void(finalized.pk, "")
    assert "reason" in err.value.errors
    voided = actions.void(finalized.pk, "wrong price")
    assert voided.state == "void" and voided.number == finalized.number
    with pytest.raises(ActionError):
        actions.finalize(voided.pk)
    with pytest.raises(DatabaseError), transaction.atomic(), connection.cursor() as cur:
        cur.execute("UPDATE billing_invoice SET state = 'finalized' WHERE id = %s", [voided.pk])
    new = actions.reissue(voided.pk)
    assert new.state == "draft" and new.replaces_id == voided.pk and new.total == Decimal("15.12")
    new = actions.finalize(new.pk)
    year = new.finalized_at.year
    assert new.number == f"GF-{year}-000002"
    numbers = sorted(Invoice.objects.exclude(number=None).values_list("number_seq", flat=True))
    assert numbers == [1, 2]


def test_late_usage_becomes_an_adjustment_on_the_next_invoice(finalized, flavors):
    october_usage(flavors, extra_seconds=3600)  # the share ran an hour longer than measured before
    assert Invoice.objects.get(pk=finalized.pk).total == Decimal("15.12")
    usage(hour(2026, 11, 1), hour(2026, 11, 2), [sample("acme", flavors["a100"], hour(2026, 11, 1, 0), "3600")])
    with pytest.raises(ActionError):  # November has not ended: drafting is fine, finalizing is not
        actions.finalize(actions.draft_invoice(finalized.tenant, "2026-11").pk)
    november = actions.draft_invoice(finalized.tenant, "2026-11")
    adjustment = november.lines.get(kind="adjustment")
    assert adjustment.adjusts_id == finalized.pk
    assert adjustment.billed_unit_seconds == Decimal(1800) and adjustment.measured_unit_seconds == Decimal(5400)
    assert adjustment.unit_seconds == Decimal(3600) and adjustment.amount == Decimal("0.25")
    assert november.total == Decimal("2.75")
