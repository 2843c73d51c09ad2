"""Every area of the portal is reachable from the navigation and the tenant page."""

from __future__ import annotations

import pytest

from tests.support import factories

pytestmark = pytest.mark.django_db


def test_billing_is_in_the_nav_and_billing_root_redirects(client):
    alice = factories.user("alice")
    tenant = factories.tenant("acme", owner=alice)
    client.force_login(alice)
    home = client.get("/").content.decode()
    assert 'href="/billing/invoices/"' in home
    assert client.get("/billing/").headers["Location"] == "/billing/invoices/"
    detail = client.get(f"/tenants/{tenant.slug}/").content.decode()
    assert f'href="/billing/usage/{tenant.slug}/"' in detail
    assert client.get(f"/billing/usage/{tenant.slug}/").status_code == 200
    assert f'href="/gpu/tenants/{tenant.slug}/"' in detail
    assert client.get(f"/gpu/tenants/{tenant.slug}/").status_code == 200
    assert client.get("/gpu/").headers["Location"] == "/gpu/flavors/"


def test_nav_names_the_flavor_catalog_as_its_page_does(client):
    """One name: the navigation entry and the page it opens are both "GPU flavors"."""
    import re

    alice = factories.user("alice")
    client.force_login(alice)
    home = client.get("/").content.decode()
    link = re.search(r'<a href="/gpu/flavors/"[^>]*>([^<]+)</a>', home)
    assert link, "no navigation link to the flavor catalog"
    page = client.get("/gpu/flavors/").content.decode()
    title = re.search(r"<h1>([^<]+)</h1>", page).group(1)
    assert link.group(1) == title == "GPU flavors"
