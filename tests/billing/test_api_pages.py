"""API and pages: scoped (tenant A never sees B), role-gated, and finalized invoices stay put."""

from __future__ import annotations

import csv
import io
import re

import pytest
from django.test import Client
from rest_framework.test import APIClient

from billing import actions
from billing.models import Invoice
from tests.billing.helpers import catalog, hour, hours, sample, usage
from tests.support import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def world():
    flavors = catalog()
    alice, bob, carol = factories.user("alice"), factories.user("bob"), factories.user("carol")
    finance = factories.user("finance", roles={"billing-admin"})
    acme = factories.tenant("acme", "trusted", owner=alice, phase="ready", members={"member": carol})
    globex = factories.tenant("globex", "trusted", owner=bob, phase="ready")
    usage(hour(2026, 10, 1), hour(2026, 11, 1),
          [sample("acme", flavors["a100"], at, "3600") for at in hours(hour(2026, 10, 2, 0), 30)]
          + [sample("acme", flavors["a100-share25"], hour(2026, 10, 2, 3), "1800"),
             sample("globex", flavors["a100"], hour(2026, 10, 7, 0), "7200")])
    actions.set_price("a100", "2.00", "USD", "2026-01-01")
    actions.set_price("a100-share25", "0.50", "USD", "2026-01-01")
    inv_acme, inv_globex = actions.draft_all("2026-10")
    return {"alice": alice, "bob": bob, "carol": carol, "finance": finance, "acme": acme, "globex": globex,
            "inv_acme": inv_acme, "inv_globex": inv_globex}


def client_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def page_client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_usage_api_is_scoped(world):
    alice, carol = client_for(world["alice"]), client_for(world["carol"])
    data = alice.get("/api/v1/billing/usage/", {"tenant": "acme", "period": "2026-10"}).json()
    assert {(r["day"], r["flavor"], r["unit_seconds"]) for r in data["rows"]} == {
        ("2026-10-02", "a100", "86400.000"), ("2026-10-03", "a100", "21600.000"),
        ("2026-10-02", "a100-share25", "1800.000")}
    assert carol.get("/api/v1/billing/usage/", {"tenant": "acme", "period": "2026-10"}).status_code == 200
    assert alice.get("/api/v1/billing/usage/", {"tenant": "globex", "period": "2026-10"}).status_code == 404
    bad = alice.get("/api/v1/billing/usage/", {"tenant": "acme", "period": "October"})
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "period"


def test_invoices_visible_to_owners_and_billing_admins_only(world):
    alice, bob, carol = (client_for(world[u]) for u in ("alice", "bob", "carol"))
    finance = client_for(world["finance"])
    assert [i["tenant"] for i in alice.get("/api/v1/billing/invoices/").json()["results"]] == ["acme"]
    assert [i["tenant"] for i in carol.get("/api/v1/billing/invoices/").json()["results"]] == []  # member, not owner
    assert len(finance.get("/api/v1/billing/invoices/").json()["results"]) == 2
    other = world["inv_globex"].pk
    assert alice.get(f"/api/v1/billing/invoices/{other}/").status_code == 404
    assert alice.get(f"/api/v1/billing/invoices/{other}/download/").status_code == 404
    assert bob.get(f"/api/v1/billing/invoices/{other}/download/", {"as": "csv"}).status_code == 200


def test_finalized_invoice_cannot_be_changed_through_the_api(world):
    alice, finance = client_for(world["alice"]), client_for(world["finance"])
    pk = world["inv_acme"].pk
    assert alice.post(f"/api/v1/billing/invoices/{pk}/finalize/").status_code == 403
    done = finance.post(f"/api/v1/billing/invoices/{pk}/finalize/").json()
    assert done["state"] == "finalized" and done["number"].endswith("000001")
    for method in ("put", "patch", "delete"):
        response = getattr(finance, method)(f"/api/v1/billing/invoices/{pk}/", {"total": "0"}, format="json")
        assert response.status_code == 405
    redraft = finance.post("/api/v1/billing/invoices/draft/", {"period": "2026-10", "tenant": "acme"}, format="json")
    assert redraft.json()[0]["content_hash"] == done["content_hash"]
    assert Invoice.objects.get(pk=pk).total == world["inv_acme"].total
    # Void needs a reason; then reissue gives a new draft that replaces it.
    assert finance.post(f"/api/v1/billing/invoices/{pk}/void/", {"reason": ""}, format="json").status_code == 400
    voided = finance.post(f"/api/v1/billing/invoices/{pk}/void/", {"reason": "typo"}, format="json")
    assert voided.json()["state"] == "void"
    new = finance.post(f"/api/v1/billing/invoices/{pk}/reissue/").json()
    assert new["state"] == "draft" and new["replaces"] == done["number"]


def test_prices_api_validates_and_is_admin_only(world):
    alice, finance = client_for(world["alice"]), client_for(world["finance"])
    body = {"flavor": "a100", "per_unit_hour": "2.10", "currency": "USD", "effective_from": "2026-12-01"}
    assert alice.post("/api/v1/billing/prices/", body, format="json").status_code == 403
    bad = finance.post("/api/v1/billing/prices/", {**body, "per_unit_hour": "-1"}, format="json")
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "per_unit_hour"
    assert finance.post("/api/v1/billing/prices/", body, format="json").status_code == 201
    assert len(alice.get("/api/v1/billing/prices/").json()["results"]) == 3


def test_reconciliation_and_exports_are_for_billing_admins(world):
    alice, finance = client_for(world["alice"]), client_for(world["finance"])
    assert alice.get("/api/v1/billing/reconciliation/", {"period": "2026-10"}).status_code == 403
    assert alice.get("/api/v1/billing/exports/", {"period": "2026-10", "as": "focus"}).status_code == 403
    rows = finance.get("/api/v1/billing/reconciliation/", {"period": "2026-10"}).json()
    assert [r["tenant"] for r in rows] == ["acme", "globex"]
    actions.finalize(world["inv_acme"].pk)
    response = finance.get("/api/v1/billing/exports/", {"period": "2026-10", "as": "focus"})
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert len(rows) == 2 and {r["BillingAccountId"] for r in rows} == {"acme"}


def test_pages(world):
    alice, bob, finance = page_client(world["alice"]), page_client(world["bob"]), page_client(world["finance"])
    page = alice.get("/billing/usage/acme/?period=2026-10")
    assert page.status_code == 200
    body = page.content.decode()
    assert "<svg" in body and "a100-share25" in body
    # The chart is server-rendered SVG: the only script is the portal's own static file (progressive
    # enhancement for every page), nothing inline and nothing from elsewhere.
    assert re.findall(r"<script[^>]*>", body) == ['<script src="/static/portal/portal.js" defer>']
    assert bob.get("/billing/usage/acme/?period=2026-10").status_code == 404
    assert "acme" in alice.get("/billing/invoices/").content.decode()
    assert "globex" not in alice.get("/billing/invoices/").content.decode()
    assert alice.get(f"/billing/invoices/{world['inv_globex'].pk}/").status_code == 404
    detail = alice.get(f"/billing/invoices/{world['inv_acme'].pk}/")
    assert detail.status_code == 200 and str(world["inv_acme"].total) in detail.content.decode()
    download = alice.get(f"/billing/invoices/{world['inv_acme'].pk}/download.csv")
    assert download.status_code == 200 and download["Content-Type"] == "text/csv"
    assert alice.get("/billing/reconciliation/?period=2026-10").status_code == 403
    assert alice.get("/billing/exports/?period=2026-10").status_code == 403
    assert finance.get("/billing/reconciliation/?period=2026-10").status_code == 200
    assert finance.get("/billing/exports/?period=2026-10&as=json").status_code == 200


def test_invoice_list_query_count_does_not_grow_with_invoices(world, django_assert_max_num_queries):
    finance = client_for(world["finance"])
    with django_assert_max_num_queries(8):
        assert len(finance.get("/api/v1/billing/invoices/").json()["results"]) == 2
    flavors = catalog()
    for slug in ("tt1", "tt2", "tt3", "tt4"):
        factories.tenant(slug, "trusted", phase="ready")
    usage(hour(2026, 9, 1), hour(2026, 10, 1),
          [sample(slug, flavors["a100"], hour(2026, 9, 3), "3600") for slug in ("tt1", "tt2", "tt3", "tt4")])
    actions.draft_all("2026-09")
    with django_assert_max_num_queries(8):
        assert len(finance.get("/api/v1/billing/invoices/").json()["results"]) == 6


def test_admin_is_read_only(world):
    admin = factories.user("root", roles={"platform-admin"})
    admin.is_staff = admin.is_superuser = True
    admin.save()
    client = page_client(admin)
    pk = world["inv_acme"].pk
    assert client.get(f"/admin/billing/invoice/{pk}/change/").status_code == 200
    assert client.post(f"/admin/billing/invoice/{pk}/change/", {"total": "0"}).status_code == 403


def test_opencost_down_is_a_503_for_reconciliation_and_drafts_go_on_without_it(world, settings):
    from tests.support.services import free_port

    settings.GPUFLEET_OPENCOST_URL = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    finance = client_for(world["finance"])
    response = finance.get("/api/v1/billing/reconciliation/", {"period": "2026-10"})
    assert response.status_code == 503 and "OpenCost" in response.json()["detail"]
    page = page_client(world["finance"]).get("/billing/reconciliation/?period=2026-10")
    assert page.status_code == 503 and "OpenCost could not be queried" in page.content.decode()
    drafted = finance.post("/api/v1/billing/invoices/draft/", {"period": "2026-10"}, format="json")
    assert drafted.status_code == 200 and {i["opencost_gpu_hours"] for i in drafted.json()} == {None}
