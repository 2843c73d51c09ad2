"""The kubeconfig's sign-in really yields a token the virtual cluster's RBAC binds (real OIDC provider).

kubelogin (`kubectl oidc-login get-token`) asks the issuer for `openid` plus every `--oidc-extra-scope`
in the kubeconfig. Most providers, the test provider too, put the `groups` claim in the ID token only
when the `groups` scope was asked for. The vCluster API server maps that claim (`--oidc-groups-claim`,
prefixed with `--oidc-groups-prefix`) to groups, and gpufleet's ClusterRoleBindings inside the virtual
cluster bind those groups. So this test signs in at the real provider with exactly the kubeconfig's
scopes, reads the ID token as the API server would, and checks the tenant owner lands in the owner
binding — dropping `--oidc-extra-scope=groups` leaves the token without groups and fails it.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from urllib.parse import parse_qs, urlencode, urlsplit

import jwt
import pytest
import requests

from tenants.isolation import kubeconfig, vcluster
from tenants.isolation.config import IsolationSettings
from tests.support.oidc import TIMEOUT, to_callback

from .helpers import view

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.service]


def _flags(args: list[str], name: str) -> list[str]:
    return [a.split("=", 1)[1] for a in args if a.startswith(f"--{name}=")]


def _id_token_claims(provider, live_server, issuer: str, client_id: str, scopes: list[str]) -> dict:
    """An authorization-code + PKCE sign-in as alice asking for `scopes`, as kubelogin would."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    redirect_uri = f"{live_server.url}/oidc/callback/"
    query = urlencode({"client_id": client_id, "response_type": "code", "redirect_uri": redirect_uri,
                       "scope": " ".join(scopes), "state": secrets.token_urlsafe(8),
                       "nonce": secrets.token_urlsafe(8), "code_challenge": challenge,
                       "code_challenge_method": "S256"})
    authorize = provider.discovery["authorization_endpoint"]
    assert authorize.startswith(issuer)
    http = requests.Session()
    trace = to_callback(http, live_server.url, "alice", "alice-pw", start=f"{authorize}?{query}")
    code = parse_qs(urlsplit(trace.callback_url).query)["code"][0]
    token = http.post(provider.discovery["token_endpoint"], data={
        "grant_type": "authorization_code", "code": code, "redirect_uri": redirect_uri,
        "client_id": client_id, "client_secret": provider.client_secret, "code_verifier": verifier,
    }, timeout=TIMEOUT)
    assert token.ok, token.text
    return jwt.decode(token.json()["id_token"], options={"verify_signature": False})


def test_kubeconfig_scopes_give_the_groups_the_vcluster_rbac_binds(live_server, oidc_settings) -> None:
    provider = oidc_settings
    iso = IsolationSettings(oidc_issuer=provider.issuer, oidc_client_id=provider.client_id)
    doc = kubeconfig.render_kubeconfig("acme", iso, None)
    args = doc["users"][0]["user"]["exec"]["args"]
    issuer, client_id = _flags(args, "oidc-issuer-url")[0], _flags(args, "oidc-client-id")[0]
    scopes = ["openid", *_flags(args, "oidc-extra-scope")]  # kubelogin always asks for openid

    claims = _id_token_claims(provider, live_server, issuer, client_id, scopes)

    # What the virtual API server makes of the token (its flags as gpufleet renders them).
    server = vcluster.oidc_args(iso)
    assert _flags(server, "oidc-issuer-url") == [claims["iss"]] and _flags(server, "oidc-client-id") == [claims["aud"]]
    groups_claim, groups_prefix = _flags(server, "oidc-groups-claim")[0], _flags(server, "oidc-groups-prefix")[0]
    user_groups = {groups_prefix + g for g in claims.get(groups_claim) or []}

    bindings = vcluster.rbac_manifests(view("standard", slug="acme"), iso)
    bound_roles = {b["roleRef"]["name"] for b in bindings
                   if any(s["kind"] == "Group" and s["name"] in user_groups for s in b["subjects"])}
    # alice is gpufleet:acme:owner (and viewer): the owner binding (cluster-admin) must match.
    assert "cluster-admin" in bound_roles, (scopes, sorted(user_groups))
