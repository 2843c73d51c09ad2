"""No page of the portal links into /api/: every page reachable from the navigation and the pages' own links
(followed breadth-first, GET only) is crawled as a platform admin and as a tenant owner."""

from __future__ import annotations

import re
from collections import deque

import pytest
from django.test import Client

from tenants.models import Phase
from tests.support import factories

pytestmark = pytest.mark.django_db

HREF = re.compile(r'href="([^"#?]*)[^"]*"')
SKIP = ("/static/", "/admin/", "/oidc/", "/logout/")


def crawl(client: Client, start: str = "/", limit: int = 80) -> dict[str, list[str]]:
    """{page: its links into /api/}; fails on any 5xx."""
    seen, queue, api_links = {start}, deque([start]), {}
    while queue and len(seen) <= limit:
        path = queue.popleft()
        response = client.get(path)
        assert response.status_code < 500, f"{path}: {response.status_code}"
        if not response.get("Content-Type", "").startswith("text/html"):
            continue
        links = HREF.findall(response.content.decode())
        api_links[path] = [link for link in links if link.startswith("/api/")]
        for link in links:
            if link.startswith("/") and not link.startswith(("/api/", *SKIP)) and link not in seen:
                seen.add(link)
                queue.append(link)
    return api_links


@pytest.fixture
def fleet(alice, bob):  # type: ignore[no-untyped-def]
    factories.tenant("acme", "standard", owner=alice, phase=Phase.READY)
    factories.tenant("speech", "standard", owner=alice, phase=Phase.REQUESTED)
    factories.tenant("contractors", "untrusted", owner=bob, phase=Phase.READY)


@pytest.mark.usefixtures("fleet")
@pytest.mark.parametrize("who", ["admin", "owner"])
def test_no_portal_page_links_into_the_api(who, admin_client_, alice_client) -> None:
    client = admin_client_ if who == "admin" else alice_client
    pages = crawl(client)
    assert "/tenants/acme/" in pages and "/tenants/acme/isolation/" in pages
    offenders = {page: links for page, links in pages.items() if links}
    assert not offenders, offenders
