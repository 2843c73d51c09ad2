"""One figure per fact (issue 28): every page that shows a flavor's installed, schedulable, sold or in-use
units shows the same number, labelled (scheduling/figures.py defines them; templates mark each with
data-figure/data-flavor[/data-tenant]). Before, a100-whole was 60 on the overview and flavors page
(installed + Karpenter pool headroom) and 44 on /fleet/ and the cluster pages, and a tenant's home said
"in use now: 2 a100-3g" where its utilisation page said "No GPU allocated this month"."""

from __future__ import annotations

import re
from collections import defaultdict
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from scheduling.clusters.models import Cluster
from tests.portal.test_metrics_down import fleet  # noqa: F401  (the demo fleet, one user per role)
from tests.support.clock import MID_NOVEMBER_2026, pinned

pytestmark = pytest.mark.django_db

FIGURE = re.compile(r'data-figure="(\w+)" data-flavor="([^"]+)"(?: data-tenant="([^"]+)")?>\s*([0-9.,]+)\s*<')


def figures_on(client: Client, paths: list[str]) -> dict[tuple[str, str, str], dict[str, Decimal]]:
    """(figure, flavor, tenant) -> {path: value} over the pages."""
    seen: dict[tuple[str, str, str], dict[str, Decimal]] = defaultdict(dict)
    for path in paths:
        response = client.get(path)
        assert response.status_code == 200, path
        for figure, flavor, tenant, value in FIGURE.findall(response.content.decode()):
            seen[(figure, flavor, tenant or "")][path] = Decimal(value.replace(",", ""))
    return seen


def _client(username: str) -> Client:
    client = Client()
    client.force_login(get_user_model().objects.get(username=username))
    return client


def test_capacity_and_sold_agree_on_every_page(fleet) -> None:  # noqa: F811
    with pinned(MID_NOVEMBER_2026):
        paths = ["/", "/gpu/flavors/", "/fleet/",
                 *(f"/gpu/clusters/{name}/" for name in Cluster.objects.values_list("name", flat=True))]
        seen = figures_on(_client("root-admin"), paths)
        html = _client("root-admin").get("/").content.decode()
    disagree = {key: where for key, where in seen.items() if len(set(where.values())) > 1}
    assert not disagree, disagree
    whole = {figure: next(iter(seen[(figure, "a100-whole", "")].values())) for figure in ("installed", "schedulable")}
    assert whole["schedulable"] > whole["installed"]  # the demo's Karpenter pool adds headroom ...
    assert set(seen[("installed", "a100-whole", "")]) == set(paths)  # ... and every page shows installed
    assert {"/", "/gpu/flavors/", "/fleet/"} <= set(seen[("schedulable", "a100-whole", "")])
    assert {"/", "/gpu/flavors/", "/fleet/"} <= set(seen[("sold", "a100-whole", "")])
    assert "Installed" in html and "Schedulable" in html and "(incl. pool headroom)" in html


def test_in_use_now_agrees_between_a_tenants_home_and_its_utilisation_page(fleet) -> None:  # noqa: F811
    with pinned(MID_NOVEMBER_2026):
        seen = figures_on(_client("alice"), ["/", "/fleet/tenants/vision/"])
    vision = {key: where for key, where in seen.items() if key[0] == "in_use" and key[2] == "vision"}
    assert vision, seen
    for key, where in vision.items():
        assert set(where) == {"/", "/fleet/tenants/vision/"}, (key, where)
        assert len(set(where.values())) == 1, (key, where)
    assert any(v > 0 for where in vision.values() for v in where.values())


def test_a_tenant_home_lists_each_flavor_once(fleet) -> None:  # noqa: F811
    """vision has a quota on two clusters for the same flavor: one row, the quotas added up."""
    from scheduling.models import Quota

    with pinned(MID_NOVEMBER_2026):
        html = _client("alice").get("/").content.decode()
    tables = [part[:part.index("</table>")] for part in html.split('data-testid="headroom"')[1:]]
    rows = [re.findall(r'<tr><td><a href="/gpu/tenants/([^/]+)/">([^<]+)</a>', table) for table in tables]
    assert any(tenant == "vision" for table in rows for tenant, _ in table), rows
    for table in rows:
        assert len(table) == len(set(table)), table
    per_cluster = Quota.objects.filter(tenant__slug="vision").values_list("flavor__name", flat=True)
    assert len(per_cluster) > len(set(per_cluster))  # the demo really has the same flavor on two clusters
