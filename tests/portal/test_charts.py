"""Charts (issue 28, item 3): server-rendered SVG where people would rather look (spend trend and forecast
on the overview, fleet allocation and utilisation on /fleet/, quota vs use per flavor on a tenant's
utilisation page), accessible (role=img named by <title>, described by <desc>) and sized by their viewBox
(no fixed width, so they fit a 390 px screen; the browser crawl checks that in Chromium)."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from billing.charts import line_chart
from tests.portal.test_metrics_down import fleet  # noqa: F401  (the demo fleet, metrics source down)
from tests.support.clock import MID_NOVEMBER_2026, pinned

SVG = re.compile(r"<svg [^>]*class=\"chart\"[^>]*>.*?</svg>", re.S)


def _client(username: str) -> Client:
    client = Client()
    client.force_login(get_user_model().objects.get(username=username))
    return client


def _charts(html: str) -> dict[str, str]:
    found = {}
    for svg in SVG.findall(html):
        name = re.search(r'data-testid="chart-([^"]+)"', svg)
        assert name, svg[:200]
        found[name.group(1)] = svg
    return found


def _accessible(svg: str) -> None:
    head = svg[:svg.index(">")]
    assert 'role="img"' in head and "viewBox=" in head and " width=" not in head, head
    title, desc = re.search(r'aria-labelledby="([^" ]+) ([^"]+)"', head).groups()  # type: ignore[union-attr]
    assert re.search(rf'<title id="{title}">[^<]+</title>', svg)
    assert re.search(rf'<desc id="{desc}">[^<]+</desc>', svg)


@pytest.mark.django_db
def test_pages_show_their_charts_with_the_metrics_source_down(fleet) -> None:  # noqa: F811
    with pinned(MID_NOVEMBER_2026):
        overview = _charts(_client("root-admin").get("/").content.decode())
        fleet_page = _charts(_client("root-admin").get("/fleet/").content.decode())
        tenant = _charts(_client("alice").get("/fleet/tenants/vision/").content.decode())
    assert set(overview) == {"spend"}
    assert set(fleet_page) == {"fleet-allocation", "fleet-utilisation"}
    assert "quota-a100-whole" in tenant
    for svg in [*overview.values(), *fleet_page.values(), *tenant.values()]:
        _accessible(svg)
        assert "<polyline" in svg  # something was drawn
    assert "forecast" in overview["spend"] and 'stroke-dasharray' in overview["spend"]


def test_line_chart_gaps_escapes_and_latest_values() -> None:
    svg = line_chart(["Nov 1", "Nov 2", "Nov 3"], {"a<b": [Decimal(1), None, Decimal("2.5")]}, chart_id="t",
                     title="T & co", desc="d", unit="units")
    assert "a&lt;b" in svg and "T &amp; co" in svg and "a<b" not in svg
    assert "<polyline" not in svg and svg.count("<circle") == 2  # a gap splits the line: two single points
    assert "(latest 2.5 units)" in svg
    _accessible(svg)
