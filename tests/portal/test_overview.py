"""The home page answers "how is my fleet / my team doing", and its numbers link to the pages that explain them.

The fleet is the demo's, seeded with the clock pinned to Sunday 15 November 2026, 12:00 UTC: the demo's
pattern (weekdays 08-18 UTC) has run from Monday 2 November to Friday 13 November, so 100 hours are measured
and the newest measured hour ends Friday 13 November 18:00.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from decimal import Decimal
from html.parser import HTMLParser

import pytest
from django.core.management import call_command
from django.test import Client

from billing.month_to_date import forecast
from billing.periods import period_bounds
from scheduling.models import QuotaChangeRequest
from tenants import actions
from tenants.models import Tenant
from tests.support import factories
from tests.support.clock import MID_NOVEMBER_2026, pinned

pytestmark = pytest.mark.django_db

MEASURED_HOURS = 100
# Demo prices x units held per working hour (billing.demo PATTERN).
VISION_PER_HOUR = 4 * Decimal("2.40") + 2 * Decimal("1.10") + 6 * Decimal("0.70")
NLP_PER_HOUR = 2 * Decimal("2.40") + 6 * Decimal("1.10")
CONTRACTORS_PER_HOUR = 1 * Decimal("2.40")


@pytest.fixture
def demo() -> Iterator[None]:
    with pinned(MID_NOVEMBER_2026):
        call_command("demo", stdout=io.StringIO())
        yield


def page(user) -> str:  # type: ignore[no-untyped-def]
    client = Client()
    client.force_login(user)
    response = client.get("/")
    assert response.status_code == 200
    return response.content.decode()


def text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


class _Element(HTMLParser):
    """The text of the first element carrying data-testid=<name>, nested elements included."""

    VOID = {"input", "br", "img", "meta", "link", "hr", "col", "source", "wbr"}

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name, self.depth, self.done, self.parts = name, 0, False, []

    def handle_starttag(self, tag: str, attrs: list) -> None:  # type: ignore[type-arg]
        if self.done or tag in self.VOID:
            return
        if self.depth:
            self.depth += 1
        elif ("data-testid", self.name) in attrs:
            self.depth = 1

    def handle_endtag(self, tag: str) -> None:
        if self.depth and tag not in self.VOID:
            self.depth -= 1
            self.done = self.done or self.depth == 0

    def handle_data(self, data: str) -> None:
        if self.depth and not self.done:
            self.parts.append(data)


def by_testid(html: str, name: str) -> str:
    parser = _Element(name)
    parser.feed(html)
    assert parser.done, f"no {name} on the page"
    return re.sub(r"\s+", " ", " ".join(parser.parts)).strip()


def money(value: Decimal) -> str:
    return f"{value:,.2f}"


def test_admin_home_is_the_fleet_at_a_glance(demo) -> None:
    admin = factories.user("root-admin", roles={"platform-admin"})
    html = page(admin)
    assert "<h1>Fleet overview</h1>" in html and "My tenants" not in html

    # Tenants by phase, with the waiting approvals linking to the approvals queue.
    assert "Tenants 4 1 requested · 3 approved" == by_testid(html, "tile-tenants")
    assert 'href="/approvals/" data-testid="tile-approvals"' in html
    assert by_testid(html, "tile-approvals") == "Waiting for approval 1 tenant request"
    assert 'href="/tenants/?phase=requested"' in html

    # GPUs per flavor: capacity, quota sold to tenants that hold quota, units in use in the newest hour.
    flavors = by_testid(html, "fleet-flavors")
    # Installed, schedulable (installed + the Karpenter pool's headroom), sold, share, in use now.
    whole = re.search(r"a100-whole whole (\d+) (\d+) (\d+) .*?% (\d+(?:\.\d+)?)", flavors)
    assert whole, flavors
    assert int(whole.group(2)) > int(whole.group(1))
    # vision, nlp-inference, contractors on `default`, then each on its other cluster (scheduling/catalog/demo.py)
    assert whole.group(3) == str(6 + 4 + 2 + 8 + 4 + 2)
    assert whole.group(4) == str(4 + 2 + 1)  # held in the hour from 17:00 on Friday 13 November
    assert 'href="/gpu/flavors/"' in html

    # Money: spent this month so far and the month it is on track for.
    spent = (VISION_PER_HOUR + NLP_PER_HOUR + CONTRACTORS_PER_HOUR) * MEASURED_HOURS
    start, end = period_bounds(MID_NOVEMBER_2026.date())
    from datetime import UTC, datetime

    expected_forecast = forecast(spent, start, end, datetime(2026, 11, 13, 18, tzinfo=UTC))
    spend = by_testid(html, "tile-spend")
    assert f"{money(spent)} USD" in spend and f"on track for {money(expected_forecast)} USD" in spend
    assert expected_forecast == Decimal("7011.76")  # 2,980.00 over 12.75 of 30 days
    assert 'href="/billing/invoices/" data-testid="tile-spend"' in html

    # Quota requests waiting and the fleet sync state.
    assert by_testid(html, "tile-quota-requests").split()[3] == "0"
    assert 'href="/gpu/requests/" data-testid="tile-quota-requests"' in html
    assert "No fleet sync has run yet" in by_testid(html, "fleet-sync")


def test_quota_requests_waiting_are_counted(demo) -> None:
    from scheduling import actions as scheduling

    alice = factories.user("alice")
    scheduling.propose_quota_change(Tenant.objects.get(slug="vision"), flavor="a100-whole", nominal=8,
                                    reason="more", proposed_by=alice)
    assert QuotaChangeRequest.objects.filter(state="pending").count() == 1
    html = page(factories.user("root-admin", roles={"platform-admin"}))
    assert by_testid(html, "tile-quota-requests").split()[3] == "1"


def test_billing_admin_gets_the_fleet_overview_without_admin_links(demo) -> None:
    html = page(factories.user("bill", roles={"billing-admin"}))
    assert "<h1>Fleet overview</h1>" in html and 'href="/approvals/"' not in html


def test_tenant_home_shows_headroom_use_spend_endpoints_and_activity(demo) -> None:
    alice = factories.user("alice")  # owner of vision and nlp-inference in the demo
    html = page(alice)
    assert "Your tenants at a glance" in html
    sections = re.findall(r'<section class="card" aria-labelledby="t-([a-z-]+)" data-testid="tenant-overview">', html)
    assert sections == ["nlp-inference", "vision"]
    vision = html[html.index('aria-labelledby="t-vision"'):]
    headroom = by_testid(vision, "headroom")
    # One row per flavor: quota 6 on `default` + 8 on its other cluster, 4 in use (measured per flavor), 10 left.
    assert re.search(r"a100-whole 14 4 10\b", headroom), headroom
    assert headroom.count("a100-whole") == 1
    spend = by_testid(vision, "tile-spend")
    spent = VISION_PER_HOUR * MEASURED_HOURS
    assert f"{money(spent)} USD" in spend
    assert 'href="/billing/usage/vision/" data-testid="tile-spend"' in vision
    assert "nightly-captions" in by_testid(vision, "overview-endpoints")
    assert 'href="/gpu/tenants/vision/" data-testid="tile-quota"' in vision
    activity = by_testid(vision, "overview-activity")
    assert "task:cli:demo · quota.set" in activity or "tenant." in activity, activity


def test_members_see_use_but_not_money_and_never_other_tenants(demo) -> None:
    mike = factories.user("mike")
    actions.add_member(Tenant.objects.get(slug="vision"), mike, "member")
    html = page(mike)
    assert 'aria-labelledby="t-vision"' in html and 'aria-labelledby="t-nlp-inference"' not in html
    assert "tile-spend" not in html and "tile-in-use" in html
    assert "contractors" not in html


def test_someone_without_tenants_is_offered_to_request_one(db) -> None:
    html = page(factories.user("newcomer"))
    assert "You are not a member of any tenant yet" in html and 'href="/tenants/new/"' in html
