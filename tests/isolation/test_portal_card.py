"""The tenant page offers the kubeconfig download; the link works with the portal's session."""

from __future__ import annotations

import pytest
import yaml
from django.test import Client

from tenants.models import Phase
from tests.support import factories

pytestmark = pytest.mark.django_db


def test_tenant_page_links_the_kubeconfig_and_the_link_works(settings) -> None:
    settings.OIDC_OP_ISSUER = "https://login.gpufleet.test"
    alice = factories.user("alice")
    acme = factories.tenant("acme", "untrusted", owner=alice, phase=Phase.READY)
    client = Client()
    client.force_login(alice)
    page = client.get("/tenants/acme/")
    assert page.status_code == 200
    html = page.content.decode()
    href = "/tenants/acme/kubeconfig/"  # a portal page, not the API (no portal page links into /api/)
    assert f'href="{href}"' in html and "Download kubeconfig" in html
    assert 'href="/tenants/acme/blocked-flows/"' in html and 'href="/tenants/acme/isolation/"' in html
    assert 'href="/api/' not in html
    assert acme.pk
    doc = yaml.safe_load(client.get(href).content)
    assert doc["current-context"] == "gpufleet-acme"
