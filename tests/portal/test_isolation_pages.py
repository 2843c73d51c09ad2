"""The tenant page's isolation and blocked-flows links are portal pages (not the DRF browsable API): the GPU
modes and egress the trust level allows, in words; dropped flows with a clear empty state without Hubble."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.test import Client

from tenants.models import Phase
from tests.isolation.test_cilium_cli import stub_path  # noqa: F401  (fixture: stub cilium/hubble on PATH)
from tests.support import factories

pytestmark = pytest.mark.django_db


def signed_in(user) -> Client:  # type: ignore[no-untyped-def]
    client = Client()
    client.force_login(user)
    return client


def text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_tenant_page_links_stay_in_the_portal(alice, alice_client) -> None:
    factories.tenant("acme", "standard", owner=alice, phase=Phase.READY)
    html = alice_client.get("/tenants/acme/").content.decode()
    assert 'href="/tenants/acme/isolation/"' in html and 'href="/tenants/acme/blocked-flows/"' in html
    assert not re.findall(r'href="/api/[^"]*"', html)


def test_isolation_page_says_what_the_trust_level_allows(alice, alice_client) -> None:
    factories.tenant("acme", "standard", owner=alice, phase=Phase.READY)
    response = alice_client.get("/tenants/acme/isolation/")
    assert response.status_code == 200
    page = text(response.content.decode())
    assert "Isolation of acme" in page
    assert "allowed Whole GPUs" in page and "allowed MIG instances" in page
    assert "not allowed HAMi shares" in page and "trust level standard does not allow it" in page
    assert "The internet: allowed" in page and "shared GPU node pools" in page
    assert 'href="/api/' not in response.content.decode()


def test_untrusted_tenant_has_no_internet_and_nodes_of_its_own(bob) -> None:
    factories.tenant("contractors", "untrusted", owner=bob, phase=Phase.READY)
    page = text(signed_in(bob).get("/tenants/contractors/isolation/").content.decode())
    assert "not allowed MIG instances" in page and "The internet: blocked" in page
    assert "gpufleet.io/dedicated-tenant=contractors" in page


def test_isolation_pages_are_scoped(alice, bob_client) -> None:
    factories.tenant("acme", "standard", owner=alice, phase=Phase.READY)
    for path in ("isolation", "blocked-flows", "kubeconfig"):
        assert bob_client.get(f"/tenants/acme/{path}/").status_code == 404


def test_blocked_flows_without_hubble_is_a_clear_empty_state(alice, alice_client, tmp_path, monkeypatch) -> None:
    factories.tenant("acme", "standard", owner=alice, phase=Phase.READY)
    monkeypatch.setenv("PATH", str(tmp_path))  # no hubble binary anywhere
    response = alice_client.get("/tenants/acme/blocked-flows/")
    assert response.status_code == 200
    html = response.content.decode()
    assert 'data-testid="hubble-unavailable"' in html and "Hubble is not reachable" in html
    assert "hubble_unavailable" not in html and 'href="/api/' not in html


def test_blocked_flows_lists_what_hubble_recorded(alice, alice_client, stub_path: Path) -> None:  # noqa: F811
    factories.tenant("acme", "standard", owner=alice, phase=Phase.READY)
    response = alice_client.get("/tenants/acme/blocked-flows/")
    assert response.status_code == 200
    html = response.content.decode()
    assert 'data-testid="dropped-flows"' in html and "POLICY_DENIED" in html


def test_kubeconfig_without_an_issuer_is_a_page_saying_why(alice, alice_client, settings) -> None:
    settings.OIDC_OP_ISSUER = ""
    settings.GPUFLEET_VCLUSTER_OIDC_ISSUER = ""
    factories.tenant("acme", "standard", owner=alice, phase=Phase.READY)
    response = alice_client.get("/tenants/acme/kubeconfig/")
    assert response.status_code == 409
    assert 'data-testid="kubeconfig-unavailable"' in response.content.decode()
    assert "No OIDC issuer is configured" in response.content.decode()


def test_kubeconfig_download_from_the_portal(alice, alice_client, settings) -> None:
    import yaml

    settings.OIDC_OP_ISSUER = "https://login.gpufleet.test"
    factories.tenant("acme", "standard", owner=alice, phase=Phase.READY)
    response = alice_client.get("/tenants/acme/kubeconfig/")
    assert response.status_code == 200 and response["Content-Type"] == "application/yaml"
    assert yaml.safe_load(response.content)["current-context"] == "gpufleet-acme"
