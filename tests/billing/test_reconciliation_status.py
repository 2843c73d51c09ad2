"""Reconciliation never says "ok" when the OpenCost side is empty: that is no data, not agreement."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.test import Client

from billing.reconciliation import Measured, OpenCostView, compare, rows
from tests.billing.test_api_pages import world  # noqa: F401  (fixture)
from tests.metering.scripted_http import Reply, serve
from tests.support.services import need_reference

TOL, MIN = Decimal("0.05"), Decimal("0.5")


def test_empty_opencost_side_is_no_data_not_ok() -> None:
    idle = compare("acme", Measured(), None, tolerance=TOL, min_gpu_hours=MIN)
    assert not idle.flagged and idle.status == "no_opencost_data"  # was shown as "ok"
    unseen = compare("acme", Measured(whole=Decimal(7200)), OpenCostView(None, None), tolerance=TOL,
                     min_gpu_hours=MIN)
    assert unseen.status == "no_opencost_data" and unseen.flagged
    [unconfigured] = rows({"acme": Measured(whole=Decimal(3600))}, None, tolerance=TOL, min_gpu_hours=MIN)
    assert unconfigured.status == "no_opencost_data" and unconfigured.as_json()["status"] == "no_opencost_data"
    agreed = compare("acme", Measured(whole=Decimal(3600)), OpenCostView(Decimal("1.0"), Decimal("2")),
                     tolerance=TOL, min_gpu_hours=MIN)
    assert agreed.status == "ok"


def page(user, period: str = "2026-10") -> str:  # type: ignore[no-untyped-def]
    client = Client()
    client.force_login(user)
    response = client.get(f"/billing/reconciliation/?period={period}")
    assert response.status_code == 200
    return response.content.decode()


def statuses(body: str) -> list[str]:
    import re

    return [re.sub(r"<[^>]+>", "", cell).strip()
            for cell in re.findall(r'<td data-testid="reconciliation-status">(.*?)</td>', body, re.S)]


@pytest.mark.django_db
def test_page_without_opencost_says_so(world, settings) -> None:  # noqa: F811
    settings.GPUFLEET_OPENCOST_URL = ""
    body = page(world["finance"])
    assert 'data-testid="opencost-off"' in body
    assert statuses(body) == ["no OpenCost data", "no OpenCost data"]


@pytest.mark.django_db
def test_page_with_opencost_that_has_no_tenant_data(world, settings) -> None:  # noqa: F811
    # OpenCost's recorded example answer: only kube-system, opencost and prometheus namespaces.
    recorded = (need_reference() / "opencost" / "allocation-compute-example-swagger.json").read_text()
    with serve(Reply(body=recorded)) as server:
        settings.GPUFLEET_OPENCOST_URL = server.url
        body = page(world["finance"])
    assert "ok" not in statuses(body)
    assert statuses(body) == ["no OpenCost data · flagged", "no OpenCost data · flagged"]
