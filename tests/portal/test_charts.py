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


def _label_extents(svg: str) -> list[tuple[str, float, float]]:
    """Each x-axis label's text and horizontal extent, measured at 7 px per character (wider than any
    character of the 10 px sans-serif these charts use), from its x and text-anchor."""
    out = []
    viewbox_width = float(re.search(r'viewBox="0 0 ([\d.]+) ', svg).group(1))  # type: ignore[union-attr]
    for x, anchor, text in re.findall(r'<text x="([\d.]+)" y="[\d.]+" text-anchor="(\w+)" fill="#333">([^<]+)</text>',
                                      svg):
        if not re.match(r"[A-Z][a-z]{2} \d", text):
            continue  # a y-axis value
        width, x0 = len(text) * 7.0, float(x)
        start = {"start": x0, "middle": x0 - width / 2, "end": x0 - width}[anchor]
        out.append((text, start, start + width))
    assert out and viewbox_width
    return [*out, ("", 0.0, viewbox_width)]


def test_axis_labels_are_never_cut_at_the_edges() -> None:
    """Issue 28: the spend chart showed "Nov 3" for the month's last day, "Nov 30", cut by the picture's
    right edge (centred on the last point, 10 px from the edge)."""
    for days in (30, 31, 2, 1):
        labels = [f"Nov {d}" for d in range(1, days + 1)]
        svg = line_chart(labels, {"spent": [Decimal(d) for d in range(days)]}, chart_id="spend", title="t",
                         desc="d", unit="EUR")
        *extents, (_, _, right_edge) = _label_extents(svg)
        assert extents[-1][0] == labels[-1]  # the last day is labelled, in full
        for text, start, end in extents:
            assert 0 <= start and end <= right_edge, (days, text, start, end)
    # Long labels at the left edge start at their point instead of reaching past the picture.
    svg = line_chart(["Nov 1 2026 00:00", "Nov 2 2026 00:00"], {"a": [Decimal(1), Decimal(2)]}, chart_id="x",
                     title="t", desc="d", unit="u")
    *extents, (_, _, right_edge) = _label_extents(svg)
    assert all(0 <= start and end <= right_edge for _, start, end in extents), extents
