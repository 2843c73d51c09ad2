"""Issue 16 §5: with only OIDC_OP_ISSUER set (as in production), every endpoint comes from the provider's
discovery document -- a full sign-in against the real test provider (tests/oidc), no OIDC_OP_* overrides."""

from __future__ import annotations

import pytest
import requests
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured

from gpufleet.settings import oidc_discovery
from gpufleet.settings.base import oidc_endpoints
from tests.support.oidc import DEFAULT_ACCOUNTS, sign_in
from tests.support.services import free_port


@pytest.fixture
def issuer_only(oidc_provider, settings, monkeypatch):
    for name in oidc_discovery.FIELDS:
        monkeypatch.delenv(name, raising=False)
    oidc_provider.set_accounts(DEFAULT_ACCOUNTS)
    oidc_discovery.discover.cache_clear()
    settings.OIDC_OP_ISSUER = oidc_provider.issuer
    for name, value in oidc_endpoints(oidc_provider.issuer).items():
        setattr(settings, name, value)
    settings.OIDC_RP_CLIENT_ID = oidc_provider.client_id
    settings.OIDC_RP_CLIENT_SECRET = oidc_provider.client_secret
    settings.GPUFLEET_OIDC_ENABLED = True
    return oidc_provider


@pytest.mark.django_db(transaction=True)
def test_sign_in_with_endpoints_from_the_discovery_document(live_server, issuer_only) -> None:
    d = issuer_only.discovery
    resolved = {name: str(value) for name, value in oidc_endpoints(issuer_only.issuer).items()}
    assert resolved == {name: d.get(field, "") for name, field in oidc_discovery.FIELDS.items()}
    assert resolved["OIDC_OP_AUTHORIZATION_ENDPOINT"] != f"{issuer_only.issuer}/authorize"  # not guessed
    http = requests.Session()
    _, response = sign_in(http, live_server.url, "alice", "alice-pw")
    assert response.status_code == 302 and response.headers["Location"] == "/"
    assert get_user_model().objects.filter(username="alice").exists()


def test_a_discovery_document_for_another_issuer_is_refused(oidc_provider) -> None:
    oidc_discovery.discover.cache_clear()
    wrong = oidc_provider.issuer.replace("127.0.0.1", "localhost")  # same server, another issuer name
    with pytest.raises(ImproperlyConfigured, match="names issuer"):
        str(oidc_endpoints(wrong)["OIDC_OP_TOKEN_ENDPOINT"])


def test_an_unreachable_provider_fails_clearly_and_is_retried() -> None:
    oidc_discovery.discover.cache_clear()
    issuer = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ImproperlyConfigured, match="OIDC discovery failed at"):
        str(oidc_endpoints(issuer)["OIDC_OP_JWKS_ENDPOINT"])
    assert oidc_discovery.discover.cache_info().currsize == 0  # not cached as a failure
