"""Each input here answered 500 (or a wrong status) before; now a 4xx naming the field, nothing written."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from rest_framework.test import APIClient

from billing.models import Price
from gpufleet import clock
from tenants.actions import DISPLAY_NAME_MAX
from tests.support import factories

from .conftest import snapshot, write_routes

pytestmark = pytest.mark.django_db


def fields(response: Any) -> set[str]:
    return {e["field"] for e in response.json()["errors"]}


def test_deeply_nested_json_is_400_on_every_write_route(world, gitops_repo: Path) -> None:
    body = "[" * 1000 + "]" * 1000
    before = snapshot(gitops_repo)
    for method, path in write_routes(world):
        response = getattr(world["client"], method)(path, body, content_type="application/json")
        assert response.status_code == 400, (method, path, response.status_code)
        assert "nested" in response.json()["detail"], response.json()
    # Also an object nested inside a valid-looking payload, under the interpreter's limit but absurd.
    deep: Any = "x"
    for _ in range(100):
        deep = {"a": deep}
    response = world["client"].post("/api/v1/tenants/", json.dumps({"slug": "deep", "display_name": deep,
                                                                    "trust_level": "standard"}),
                                    content_type="application/json")
    assert response.status_code == 400
    assert snapshot(gitops_repo) == before


@pytest.mark.parametrize(("value", "reason"), [
    ("1e12", "decimal number"),  # an exponent: was stored... or overflowed numeric(18, 6)
    ("1000000000000", "less than"),  # 13 integer digits overflow numeric(18, 6)
    (1e12, "must be a string"),  # a JSON number: the document says a decimal string (as large, was "less than")
    ("1_000", "decimal number"),  # Decimal() accepts digit separators
    ("Infinity", "decimal number"),
    ("NaN", "decimal number"),
    ("\uff11\uff12", "decimal number"),  # full-width digits
    ("1.0000001", "decimal places"),
    ("-1", "negative"),
    (True, "must be a string"),
    ([], ""),
])
def test_bad_prices_are_400_naming_per_unit_hour(world, gitops_repo: Path, value: Any, reason: str) -> None:
    before = snapshot(gitops_repo)
    response = world["client"].post("/api/v1/billing/prices/", {"flavor": "h100", "per_unit_hour": value,
                                                                 "currency": "USD", "effective_from": "2026-12-01"},
                                    format="json")
    assert response.status_code == 400, response.content
    assert fields(response) == {"per_unit_hour"}, response.json()
    assert reason in response.json()["detail"]
    assert snapshot(gitops_repo) == before


def test_minus_zero_is_stored_as_zero(world) -> None:
    response = world["client"].post("/api/v1/billing/prices/", {"flavor": "h100", "per_unit_hour": "-0",
                                                                 "currency": "USD", "effective_from": "2026-12-01"},
                                    format="json")
    assert response.status_code == 201, response.content
    assert response.json()["per_unit_hour"] == "0.000000"
    assert not Price.objects.get(effective_from="2026-12-01").per_unit_hour.is_signed()


# Dates relative to today (gpufleet.clock): the horizon moves with it.
SIX_YEARS_AHEAD = "six years ahead"


@pytest.mark.parametrize("when", ["9999-12-31", SIX_YEARS_AHEAD, "20261201", "2026-W49-1", 20261201])
def test_effective_from_is_a_date_within_five_years(world, gitops_repo: Path, when: Any) -> None:
    if when == SIX_YEARS_AHEAD:
        when = (clock.today() + timedelta(days=6 * 366)).isoformat()
    before = snapshot(gitops_repo)
    response = world["client"].post("/api/v1/billing/prices/", {"flavor": "h100", "per_unit_hour": "3",
                                                                 "currency": "USD", "effective_from": when},
                                    format="json")
    assert response.status_code == 400, response.content
    assert fields(response) == {"effective_from"}
    assert snapshot(gitops_repo) == before
    # ...and an earlier price can still be set (a far-future price used to block every one).
    ok = world["client"].post("/api/v1/billing/prices/", {"flavor": "h100", "per_unit_hour": "3", "currency": "USD",
                                                          "effective_from": "2026-12-01"}, format="json")
    assert ok.status_code == 201, ok.content


FULL_WIDTH_2026 = "\uff12\uff10\uff12\uff16"


@pytest.mark.parametrize("period", ["0000-01", "9999-12", "1999-12", "2026-13", "2026-3", f"{FULL_WIDTH_2026}-03"])
def test_billing_periods_out_of_range_are_400_everywhere(world, gitops_repo: Path, period: str) -> None:
    client, before = world["client"], snapshot(gitops_repo)
    responses = {
        "usage": client.get("/api/v1/billing/usage/", {"tenant": "acme", "period": period}),
        "invoices": client.get("/api/v1/billing/invoices/", {"period": period}),
        "export": client.get("/api/v1/billing/exports/", {"period": period}),
        "reconciliation": client.get("/api/v1/billing/reconciliation/", {"period": period}),
        "draft": client.post("/api/v1/billing/invoices/draft/", {"period": period}, format="json"),
    }
    for name, response in responses.items():
        assert response.status_code == 400, (name, response.status_code, response.content[:300])
        assert fields(response) == {"period"}, (name, response.json())
    assert snapshot(gitops_repo) == before


def test_usage_without_parameters_is_400_naming_tenant(world) -> None:
    response = world["client"].get("/api/v1/billing/usage/")
    assert response.status_code == 400, response.content
    assert "tenant" in fields(response)


# WSGI hands headers over as latin-1 text: the raw bytes A0 and 85 arrive as NBSP and U+0085, which
# str.split() treats as whitespace (the header then had no parts: IndexError).
@pytest.mark.parametrize("header", ["\u00a0", "\u0085", " \u00a0 ", "\u0085\u00a0", "Bearer", "Bearer\u00a0"])
def test_odd_authorization_headers_are_401_not_500(db, header: str) -> None:
    client = APIClient()
    response = client.get("/api/v1/tenants/", HTTP_AUTHORIZATION=header)
    assert response.status_code in (401, 403), response.status_code


def test_display_name_has_one_limit_in_the_api_the_action_and_the_schema(world, gitops_repo: Path) -> None:
    client = world["client"]
    schema = yaml.safe_load(client.get("/api/v1/schema/").content)
    for name in ("TenantCreate", "PatchedTenantUpdate"):
        assert schema["components"]["schemas"][name]["properties"]["display_name"]["maxLength"] == DISPLAY_NAME_MAX
    before = snapshot(gitops_repo)
    too_long = "x" * (DISPLAY_NAME_MAX + 1)
    created = client.post("/api/v1/tenants/", {"slug": "longname", "trust_level": "standard",
                                               "display_name": too_long}, format="json")
    patched = client.patch(f"/api/v1/tenants/{world['ready'].pk}/", {"display_name": too_long}, format="json")
    assert created.status_code == patched.status_code == 400
    assert fields(created) == fields(patched) == {"display_name"}
    assert snapshot(gitops_repo) == before
    fits = client.patch(f"/api/v1/tenants/{world['ready'].pk}/", {"display_name": "y" * DISPLAY_NAME_MAX},
                        format="json")
    assert fits.status_code == 200


def test_a_user_without_rights_gets_403_for_bad_bodies_too(world) -> None:
    client = APIClient()
    client.force_authenticate(factories.user("mallory"))
    response = client.post("/api/v1/billing/prices/", "[" * 1000, content_type="application/json")
    assert response.status_code in (400, 403)
