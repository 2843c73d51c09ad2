"""Finalizing twice at the same time, on real PostgreSQL with real transactions: one number."""

from __future__ import annotations

import threading
from decimal import Decimal

import pytest
from django.db import connections

from billing import actions, invoicing
from billing.models import Invoice, InvoiceCounter
from tests.billing.helpers import catalog, hour, sample, tenants, usage

pytestmark = pytest.mark.django_db(transaction=True)


def _in_threads(fn, args_list):
    barrier = threading.Barrier(len(args_list))
    results, errors = [], []

    def work(*args):
        try:
            barrier.wait()
            results.append(fn(*args))
        except Exception as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=work, args=args) for args in args_list]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results, errors




def test_finalize_twice_concurrently_yields_one_finalized_invoice():
    flavors = catalog()
    tenants("acme", "globex")
    usage(hour(2026, 10, 1), hour(2026, 11, 1), [sample("acme", flavors["a100"], hour(2026, 10, 2), "3600"),
                                                 sample("globex", flavors["a100"], hour(2026, 10, 2), "7200")])
    actions.set_price("a100", "3.00", "USD", "2026-01-01")
    acme, globex = actions.draft_all("2026-10")

    results, errors = _in_threads(actions.finalize, [(acme.pk,), (acme.pk,), (acme.pk,)])
    assert not errors, errors
    assert {inv.number for inv in results} == {Invoice.objects.get(pk=acme.pk).number}
    assert InvoiceCounter.objects.get().last == 1

    # Different invoices finalized at once get consecutive numbers: no gap, no duplicate.
    results, errors = _in_threads(actions.finalize, [(globex.pk,), (globex.pk,)])
    assert not errors, errors
    assert sorted(Invoice.objects.values_list("number_seq", flat=True)) == [1, 2]


def test_redrafting_while_finalizing_never_changes_the_finalized_invoice():
    flavors = catalog()
    tenants("acme")
    usage(hour(2026, 10, 1), hour(2026, 11, 1), [sample("acme", flavors["a100"], hour(2026, 10, 2), "3600")])
    actions.set_price("a100", "3.00", "USD", "2026-01-01")
    (draft,) = actions.draft_all("2026-10")
    for _ in range(3):
        _results, errors = _in_threads(lambda kind: actions.finalize(draft.pk) if kind == "finalize"
                                      else actions.draft_all("2026-10"), [("finalize",), ("draft",), ("draft",)])
        assert not errors, errors
    invoice = Invoice.objects.get(pk=draft.pk)
    assert invoice.state == "finalized" and invoice.lines.count() == 1 and invoice.total == Decimal("3.00")
    header, lines = actions.invoice_content(invoice)
    assert invoicing.content_hash(header, lines) == invoice.content_hash
