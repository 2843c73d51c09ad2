"""Billing in the browser: billing admins finalize, void and reissue invoices from the invoice page (POST forms
with CSRF, confirmation, audited, through billing.actions); invoice lines read as a person writes them;
exports say why they would be empty; every billing page opens on the latest month that has data."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from billing import actions
from billing.models import Invoice
from gpufleet.audit.models import AuditEvent
from tests.billing.helpers import catalog, hour, hours, sample, usage
from tests.support import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def world():
    flavors = catalog()
    alice, bob = factories.user("alice"), factories.user("bob")
    finance = factories.user("finance", roles={"billing-admin"})
    factories.tenant("acme", "trusted", owner=alice, phase="ready", members={"member": factories.user("carol")})
    factories.tenant("globex", "trusted", owner=bob, phase="ready")
    # acme: 1,320 a100-hours (4 GPUs x 330 hours from Oct 2), 22 MIG instance-hours on Oct 3.
    usage(hour(2026, 10, 1), hour(2026, 11, 1),
          [sample("acme", flavors["a100"], at, "14400") for at in hours(hour(2026, 10, 2, 0), 330)]
          + [sample("acme", flavors["a100-3g"], at, "3600") for at in hours(hour(2026, 10, 3, 0), 22)]
          + [sample("globex", flavors["a100"], hour(2026, 10, 7, 0), "7200")])
    actions.set_price("a100", "1.10", "USD", "2026-01-01")
    actions.set_price("a100-3g", "0.45", "USD", "2026-01-01")
    acme, globex = actions.draft_all("2026-10")
    return {"alice": alice, "bob": bob, "finance": finance, "acme": acme, "globex": globex}


def signed_in(user, *, csrf: bool = False) -> Client:
    client = Client(enforce_csrf_checks=csrf)
    client.force_login(user)
    return client


def field_errors(html: str, field: str) -> str:
    """The error list rendered next to `field` (portal/forms/field.html), '' when none."""
    match = re.search(rf'<ul class="field-errors" id="id_{field}_errors" data-field="{field}">(.*?)</ul>', html, re.S)
    return match.group(1) if match else ""


def test_invoice_lines_read_as_a_person_writes_them(world):
    page = signed_in(world["alice"]).get(f"/billing/invoices/{world['acme'].pk}/").content.decode()
    assert "1,320 GPU-hours \N{MULTIPLICATION SIGN} 1.10 USD" in page
    assert "22 MIG instance-hours \N{MULTIPLICATION SIGN} 0.45 USD" in page
    assert "1,452.00 USD" in page  # 1,320 x 1.10
    assert "1320.000000" not in page and "unit-hours at" not in page
    assert "No OpenCost data for this period" in page


def test_billing_admin_finalizes_with_confirmation_and_it_is_audited(world):
    finance, pk = signed_in(world["finance"]), world["acme"].pk
    page = finance.get(f"/billing/invoices/{pk}/").content.decode()
    assert f'action="/billing/invoices/{pk}/finalize/"' in page and "Finalize invoice" in page

    unconfirmed = finance.post(f"/billing/invoices/{pk}/finalize/", {})
    assert unconfirmed.status_code == 400
    assert "tick the box to confirm" in field_errors(unconfirmed.content.decode(), "confirm")
    assert Invoice.objects.get(pk=pk).state == Invoice.State.DRAFT

    done = finance.post(f"/billing/invoices/{pk}/finalize/", {"confirm": "on"}, follow=True)
    invoice = Invoice.objects.get(pk=pk)
    assert invoice.state == Invoice.State.FINALIZED and invoice.number
    assert f"Invoice {invoice.number} is finalized" in done.content.decode()
    event = AuditEvent.objects.get(action="billing.invoice.finalize")
    assert event.actor_user_id == world["finance"].pk and event.tenant_slug == "acme"
    # A finalized invoice offers voiding, no longer finalizing.
    page = finance.get(f"/billing/invoices/{pk}/").content.decode()
    assert "/finalize/" not in page and f'action="/billing/invoices/{pk}/void/"' in page


def test_void_needs_a_reason_next_to_its_field_then_reissue(world):
    finance, pk = signed_in(world["finance"]), world["acme"].pk
    actions.finalize(pk)
    missing = finance.post(f"/billing/invoices/{pk}/void/", {"reason": "", "confirm": "on"})
    assert missing.status_code == 400
    assert "say why the invoice is void" in field_errors(missing.content.decode(), "reason")
    assert '<textarea name="reason"' in missing.content.decode()
    assert Invoice.objects.get(pk=pk).state == Invoice.State.FINALIZED

    finance.post(f"/billing/invoices/{pk}/void/", {"reason": "wrong price", "confirm": "on"})
    invoice = Invoice.objects.get(pk=pk)
    assert invoice.state == Invoice.State.VOID and invoice.void_reason == "wrong price"
    assert AuditEvent.objects.filter(action="billing.invoice.void", actor_user=world["finance"]).exists()
    reissued = finance.post(f"/billing/invoices/{pk}/reissue/")
    new = Invoice.objects.get(replaces=invoice)
    assert reissued["Location"] == f"/billing/invoices/{new.pk}/" and new.state == Invoice.State.DRAFT


def test_only_billing_admins_may_finalize_and_other_tenants_are_404(world):
    pk = world["acme"].pk
    assert signed_in(world["alice"]).post(f"/billing/invoices/{pk}/finalize/", {"confirm": "on"}).status_code == 403
    assert signed_in(world["bob"]).post(f"/billing/invoices/{pk}/finalize/", {"confirm": "on"}).status_code == 404
    assert signed_in(world["finance"]).get(f"/billing/invoices/{pk}/finalize/").status_code == 405
    owner_page = signed_in(world["alice"]).get(f"/billing/invoices/{pk}/").content.decode()
    assert "/finalize/" not in owner_page and "/void/" not in owner_page
    assert Invoice.objects.get(pk=pk).state == Invoice.State.DRAFT


def test_finalize_form_needs_the_csrf_token(world):
    finance = signed_in(world["finance"], csrf=True)
    pk = world["acme"].pk
    assert finance.post(f"/billing/invoices/{pk}/finalize/", {"confirm": "on"}).status_code == 403
    assert Invoice.objects.get(pk=pk).state == Invoice.State.DRAFT


def test_exports_that_would_be_empty_say_why_and_link_to_finalize(world):
    finance = signed_in(world["finance"])
    page = finance.get("/billing/exports/").content.decode()
    assert "October 2026" in page, "opens on the latest month with invoices, not the empty current month"
    assert "Only <strong>finalized</strong> invoices are exported" in page
    assert f'href="/billing/invoices/{world["acme"].pk}/"' in page and "Finalize the draft of acme" in page
    actions.finalize(world["acme"].pk)
    page = finance.get("/billing/exports/").content.decode()
    assert "1 finalized invoice in October 2026" in page and "Finalize the draft of acme" not in page


def test_billing_pages_open_on_the_latest_month_with_data(world):
    # The clock says mid-November 2026; the data is October's.
    usage_page = signed_in(world["alice"]).get("/billing/usage/acme/").content.decode()
    assert "October 2026" in usage_page and 'value="2026-10"' in usage_page
    assert "1,320" in usage_page  # the a100 total, in GPU-hours
    finance = signed_in(world["finance"])
    assert 'value="2026-10"' in finance.get("/billing/reconciliation/").content.decode()
    # An explicit month is still honoured.
    assert 'value="2026-11"' in signed_in(world["alice"]).get("/billing/usage/acme/?period=2026-11").content.decode()


def test_usage_by_day_is_one_row_per_day_not_per_day_and_flavor(world):
    page = signed_in(world["alice"]).get("/billing/usage/acme/?period=2026-10").content.decode()
    table = re.search(r'data-testid="usage-rows">(.*?)</table>', page, re.S).group(1)
    rows = re.findall(r"<tr>", table.split("<tbody>")[1])
    # a100 runs Oct 2 .. Oct 15 (330 h), the MIG flavor on Oct 3 as well: 14 days, one row each (not 15 rows
    # of day and flavor), with a column per flavor.
    assert len(rows) == 14
    assert re.search(r"<td[^>]*>2026-10-03</td>\s*<td[^>]*>96</td>\s*<td[^>]*>9\.429</td>", table), table
