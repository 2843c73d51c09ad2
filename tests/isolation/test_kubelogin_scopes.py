"""The scopes the tenant kubeconfig makes kubelogin request yield the claims the virtual API server reads,
against a real OpenID provider (npm `oidc-provider`, tests/oidc). The API server takes the user name from
`preferred_username` -- a claim of the `profile` scope -- and the tenant role from `groups`; without
`profile` in the request the ID token carries no user name and every kubectl call is rejected."""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
import requests

from tenants.isolation import kubeconfig
from tenants.isolation.config import IsolationSettings
from tests.support.oidc import TIMEOUT, oidc_provider, to_callback  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db


def kubelogin_scopes() -> list[str]:
    """What kubelogin sends: `openid` plus every --oidc-extra-scope of the rendered kubeconfig."""
    doc = kubeconfig.render_kubeconfig("acme", IsolationSettings(oidc_issuer="https://issuer.test"), None)
    args = doc["users"][0]["user"]["exec"]["args"]
    return ["openid", *(a.split("=", 1)[1] for a in args if a.startswith("--oidc-extra-scope="))]


def id_token_claims(provider, live_server, scopes: list[str]) -> dict:
    """An authorization-code + PKCE sign-in as alice with these scopes; the ID token's claims."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    redirect = f"{live_server.url}/oidc/callback/"
    start = provider.discovery["authorization_endpoint"] + "?" + urlencode({
        "client_id": provider.client_id, "response_type": "code", "redirect_uri": redirect,
        "scope": " ".join(scopes), "state": secrets.token_urlsafe(8), "nonce": secrets.token_urlsafe(8),
        "code_challenge": challenge, "code_challenge_method": "S256"})
    trace = to_callback(requests.Session(), live_server.url, "alice", "alice-pw", start=start)
    code = parse_qs(urlsplit(trace.callback_url).query)["code"][0]
    token = requests.post(provider.discovery["token_endpoint"], timeout=TIMEOUT, data={
        "grant_type": "authorization_code", "code": code, "redirect_uri": redirect, "code_verifier": verifier},
        auth=(provider.client_id, provider.client_secret))
    assert token.ok, token.text
    payload = token.json()["id_token"].split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def test_the_kubeconfig_scopes_carry_username_and_groups(oidc_provider, live_server) -> None:  # noqa: F811
    scopes = kubelogin_scopes()
    assert {"openid", "profile", "groups"} <= set(scopes)
    claims = id_token_claims(oidc_provider, live_server, scopes)
    username_claim = IsolationSettings().oidc_username_claim
    assert claims[username_claim] == "alice"
    assert "gpufleet:acme:owner" in claims["groups"]
    # Without `profile` (the kubeconfig before issue 15): no user name in the token.
    without = id_token_claims(oidc_provider, live_server, [s for s in scopes if s != "profile"])
    assert username_claim not in without and "groups" in without
