"""The menu (issue 28, item 4): Fleet and Node health are in it for admins, every page highlights exactly the
item it belongs to, the tenant page's crumb names what admins see, activity names people, and a favicon."""

from __future__ import annotations

import re

import pytest
from django.urls import get_resolver

from gpufleet.portal.navigation import MENU, current_item
from tests.portal.test_metrics_down import crawl, fleet  # noqa: F401  (the demo fleet, one user per role)
from tests.support.clock import MID_NOVEMBER_2026, pinned

pytestmark = pytest.mark.django_db

CURRENT = re.compile(r'<nav class="mainnav"[^>]*>(.*?)</nav>', re.S)


def _portal_pages() -> list[str]:
    """Every named page of the portal's namespaces ("namespace:name")."""
    pages = []
    for namespace in ("portal", "scheduling", "billing", "fleetops"):
        resolver = get_resolver().namespace_dict[namespace][1]
        pages += [f"{namespace}:{name}" for name in resolver.reverse_dict if isinstance(name, str)]
    return pages


def test_every_page_but_sign_in_belongs_to_one_menu_item() -> None:
    outside = {"portal:login", "portal:logout"}
    orphans = [p for p in _portal_pages() if p not in outside and current_item(p) is None]
    assert not orphans, orphans
    # Others see every page that is not an admin's under an item they see (the CSV numbers under Tenants).
    admins = {p for p in _portal_pages() if p not in outside and current_item(p).admins_only}  # type: ignore[union-attr]
    orphans = [p for p in _portal_pages() if p not in outside | admins and current_item(p, admin=False) is None]
    assert not orphans, orphans
    assert current_item("fleetops:numbers", admin=False).label == "Tenants"  # type: ignore[union-attr]
    assert current_item("fleetops:tenant").label == "Tenants"  # a tenant's page, not the admin fleet page
    assert current_item("scheduling:node-health").label == "Node health"  # not "GPU flavors"


def _client(username: str):  # type: ignore[no-untyped-def]
    from django.contrib.auth import get_user_model
    from django.test import Client

    client = Client()
    client.force_login(get_user_model().objects.get(username=username))
    return client


@pytest.mark.parametrize("username", ["root-admin", "alice"])
def test_each_page_highlights_one_item_and_it_is_the_right_one(fleet, username: str) -> None:  # noqa: F811
    client = _client(username)
    with pinned(MID_NOVEMBER_2026):
        visited, _ = crawl(client)
        wrong = []
        for path in visited:
            html = client.get(path).content.decode()
            nav = CURRENT.search(html)
            if nav is None:
                continue
            current = re.findall(r'<a href="([^"]+)" aria-current="page">([^<]+)</a>', nav.group(1))
            if len(current) != 1:
                wrong.append(f"{path}: {current}")
    assert not wrong, wrong
    home = client.get("/").content.decode()
    labels = re.findall(r"<a href=\"[^\"]+\"(?: aria-current=\"page\")?>([^<]+)</a>", CURRENT.search(home).group(1))
    admin_only = {item.label for item in MENU if item.admins_only}
    assert ("Fleet" in labels and "Node health" in labels) == (username == "root-admin")
    if username == "alice":
        assert not admin_only & set(labels)


def test_admins_crumb_is_tenants_not_my_tenants(fleet) -> None:  # noqa: F811
    with pinned(MID_NOVEMBER_2026):
        admin = _client("root-admin").get("/tenants/vision/").content.decode()
        owner = _client("alice").get("/tenants/vision/").content.decode()
    assert '<a href="/tenants/">Tenants</a> /' in admin and "My tenants" not in admin
    assert '<a href="/tenants/">My tenants</a> /' in owner


def test_activity_on_a_tenants_home_names_people(fleet) -> None:  # noqa: F811
    with pinned(MID_NOVEMBER_2026):
        html = _client("alice").get("/").content.decode()
    activity = " ".join(re.findall(r'data-testid="overview-activity">(.*?)</ul>', html, re.S))
    assert activity and not re.search(r"user:\d+", activity), activity


def test_pages_have_a_favicon(client) -> None:
    html = client.get("/login/").content.decode()
    icon = re.search(r'<link rel="icon" type="image/svg\+xml" href="([^"]+)">', html)
    assert icon, "no favicon link"
    assert client.get("/favicon.ico").headers["Location"] == icon.group(1)
    from django.contrib.staticfiles import finders

    assert finders.find("portal/favicon.svg")


def test_no_fleet_sync_yet_says_why_in_this_deployments_terms(admin_client_, settings) -> None:
    settings.CELERY_TASK_ALWAYS_EAGER = True  # the embedded demo: no beat runs the sync
    demo = admin_client_.get("/").content.decode()
    assert "No fleet sync has run yet. The embedded demo does not run it" in demo
    settings.CELERY_TASK_ALWAYS_EAGER = False
    settings.GPUFLEET_SYNC_FLEET_SECONDS = 600
    deployed = admin_client_.get("/").content.decode()
    assert "No fleet sync has run yet. Celery beat runs it every 10 min" in deployed
