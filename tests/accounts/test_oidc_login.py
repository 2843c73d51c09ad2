"""OIDC sign-in end to end: a live gpufleet server, a real provider (npm oidc-provider), a `requests` browser."""

from __future__ import annotations

import base64
import hashlib
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import pytest
import requests
from django.contrib.auth import get_user_model
from django.contrib.sessions.backends.db import SessionStore

from gpufleet.accounts.models import OIDCIdentity
from gpufleet.accounts.roles import BILLING_ADMIN, PLATFORM_ADMIN
from gpufleet.audit.models import AuditEvent
from tenants import actions
from tenants.models import Membership
from tests.support import factories
from tests.support.oidc import TIMEOUT, forms_of, sign_in, to_callback

pytestmark = pytest.mark.service


def signed_in_user_id(http: requests.Session) -> int | None:
    """The user the Django session behind the browser's cookie belongs to (None: no session)."""
    key = http.cookies.get("sessionid")
    if not key:
        return None
    session = SessionStore(session_key=key)
    user_id = session.get("_auth_user_id")
    return int(user_id) if user_id is not None else None


def roles_of(user) -> set[str]:
    return set(user.groups.values_list("name", flat=True))


def memberships_of(user) -> dict[str, tuple[str, str]]:
    return {m.tenant.slug: (m.role, m.source) for m in Membership.objects.filter(user=user).select_related("tenant")}


@pytest.fixture
def tenants_acme_other(db):
    return factories.tenant("acme"), factories.tenant("other")


def test_full_login_with_pkce_creates_user_from_claims(live_server, oidc_settings, tenants_acme_other):
    http = requests.Session()
    trace, response = sign_in(http, live_server.url, "alice", "alice-pw")

    # The authorization request was a code flow with a PKCE S256 challenge, a nonce and a state.
    params = trace.authorization_params
    assert params["response_type"] == "code"
    assert params["client_id"] == oidc_settings.client_id
    assert params["code_challenge_method"] == "S256"
    assert len(params["code_challenge"]) == 43  # base64url(SHA-256), no padding
    assert params["nonce"] and params["state"]
    assert set(params["scope"].split()) >= {"openid", "groups"}
    assert trace.prompts == ["login", "consent"]
    # The provider answered at our callback with a code, our state and its issuer (RFC 9207).
    callback = parse_qs(urlsplit(trace.callback_url).query)
    assert callback["state"] == [params["state"]]
    assert callback["iss"] == [oidc_settings.issuer]

    # The callback signs in and sends the user to the portal home.
    assert response.status_code == 302, response.text[:300]
    assert response.headers["Location"] == "/"
    user = get_user_model().objects.get(username="alice")
    assert signed_in_user_id(http) == user.pk
    assert (user.email, user.first_name, user.last_name) == ("alice@example.test", "Alice", "Admin")
    assert not user.has_usable_password()
    assert OIDCIdentity.objects.filter(issuer=oidc_settings.issuer, subject="alice", user=user).exists()
    # The session is a real one: the API accepts it, and alice (a platform admin) sees both tenants.
    api = http.get(f"{live_server.url}/api/v1/tenants/", timeout=TIMEOUT)
    assert api.status_code == 200
    assert {t["slug"] for t in api.json()["results"]} == {"acme", "other"}
    # The provider remembers the grant: a second sign-in in the same browser needs neither prompt.
    again, response = sign_in(http, live_server.url, "alice", "alice-pw")
    assert again.prompts == [] and response.status_code == 302
    assert get_user_model().objects.filter(username__startswith="alice").count() == 1


def test_groups_map_to_roles_and_memberships_and_follow_the_claim(live_server, oidc_settings, tenants_acme_other):
    acme, _other = tenants_acme_other
    sign_in(requests.Session(), live_server.url, "alice", "alice-pw")
    alice = get_user_model().objects.get(username="alice")
    # viewer+owner of acme -> owner; "gpufleet:ACME:owner", "gpufleet:acme:superuser", "wiki-editors" ignored.
    assert roles_of(alice) == {PLATFORM_ADMIN}
    assert memberships_of(alice) == {"acme": ("owner", "oidc")}

    sign_in(requests.Session(), live_server.url, "bob", "bob-pw")
    bob = get_user_model().objects.get(username="bob")
    assert roles_of(bob) == set()
    assert memberships_of(bob) == {"other": ("member", "oidc")}
    # Bob's view of the API is scoped by that membership.
    http = requests.Session()
    sign_in(http, live_server.url, "bob", "bob-pw")
    assert [t["slug"] for t in http.get(f"{live_server.url}/api/v1/tenants/", timeout=TIMEOUT).json()["results"]] \
        == ["other"]

    # Inside gpufleet, an admin grants bob a local role in acme; the directory then drops bob from
    # "other" and makes him billing admin. The next sign-in follows the claim and keeps the local grant.
    actions.add_member(acme, bob, "viewer")
    oidc_settings.set_groups("bob", ["billing-admin"])
    sign_in(requests.Session(), live_server.url, "bob", "bob-pw")
    bob.refresh_from_db()
    assert roles_of(bob) == {BILLING_ADMIN}
    assert memberships_of(bob) == {"acme": ("viewer", "local")}
    assert AuditEvent.objects.filter(action="membership.remove", tenant_slug="other").count() == 1
    assert AuditEvent.objects.filter(action="account.roles.set", object_id=str(bob.pk)).count() == 1

    # Alice loses platform-admin and is demoted in acme.
    oidc_settings.set_groups("alice", ["gpufleet:acme:member"])
    sign_in(requests.Session(), live_server.url, "alice", "alice-pw")
    assert roles_of(alice) == set()
    assert memberships_of(alice) == {"acme": ("member", "oidc")}


def test_existing_local_account_with_the_same_name_is_not_taken_over(live_server, oidc_settings, db):
    local = factories.user("carol", roles={PLATFORM_ADMIN})
    http = requests.Session()
    _, response = sign_in(http, live_server.url, "carol", "carol-pw")
    assert response.status_code == 302
    created = OIDCIdentity.objects.get(subject="carol").user
    assert created.pk != local.pk and created.username == "carol-2"
    assert signed_in_user_id(http) == created.pk
    assert roles_of(created) == set() and roles_of(local) == {PLATFORM_ADMIN}


def _with_query(url: str, **changes: str) -> str:
    parts = urlsplit(url)
    query = {k: v[0] for k, v in parse_qs(parts.query).items()} | changes
    return urlunsplit(parts._replace(query=urlencode(query)))


def test_tampered_state_is_rejected_without_a_session(live_server, oidc_settings, db):
    http = requests.Session()
    trace = to_callback(http, live_server.url, "bob", "bob-pw")
    state = parse_qs(urlsplit(trace.callback_url).query)["state"][0]
    response = http.get(_with_query(trace.callback_url, state=state[:-1] + ("A" if state[-1] != "A" else "B")),
                        allow_redirects=False, timeout=TIMEOUT)
    assert response.status_code == 302
    assert response.headers["Location"] == "/login/"
    assert signed_in_user_id(http) is None
    assert not get_user_model().objects.filter(username="bob").exists()
    # A callback claiming another issuer (mix-up attack) is refused the same way, before any code exchange.
    response = http.get(_with_query(trace.callback_url, iss="http://127.0.0.1:1"), allow_redirects=False,
                        timeout=TIMEOUT)
    assert (response.status_code, response.headers["Location"]) == (302, "/login/")
    assert signed_in_user_id(http) is None
    # The untouched callback still works: the state was ours.
    response = http.get(trace.callback_url, allow_redirects=False, timeout=TIMEOUT)
    assert response.headers["Location"] == "/"
    assert signed_in_user_id(http) == get_user_model().objects.get(username="bob").pk
    # Replaying it (state used up) is rejected, and the sign-in that happened stays intact.
    response = http.get(trace.callback_url, allow_redirects=False, timeout=TIMEOUT)
    assert response.headers["Location"] == "/login/"


def test_wrong_pkce_verifier_is_refused_by_the_provider(live_server, oidc_settings, db):
    http = requests.Session()
    trace = to_callback(http, live_server.url, "bob", "bob-pw")
    state = parse_qs(urlsplit(trace.callback_url).query)["state"][0]
    # Swap the verifier kept in the server-side session: the challenge sent no longer matches it.
    session = SessionStore(session_key=http.cookies["sessionid"])
    states = session["oidc_states"]
    states[state]["code_verifier"] = "x" * 64
    session["oidc_states"] = states
    session.save()
    response = http.get(trace.callback_url, allow_redirects=False, timeout=TIMEOUT)
    assert (response.status_code, response.headers["Location"]) == (302, "/login/")
    assert signed_in_user_id(http) is None
    assert not get_user_model().objects.filter(username="bob").exists()


def test_provider_refuses_an_authorization_request_without_pkce(live_server, oidc_settings):
    verifier = "v" * 50
    base = {"response_type": "code", "client_id": oidc_settings.client_id, "scope": "openid",
            "redirect_uri": f"{live_server.url}/oidc/callback/", "state": "s" * 32, "nonce": "n" * 32}
    response = requests.get(f"{oidc_settings.discovery['authorization_endpoint']}?{urlencode(base)}",
                            allow_redirects=False, timeout=TIMEOUT)
    assert response.status_code == 303
    error = parse_qs(urlsplit(response.headers["Location"]).query)
    assert error["error"] == ["invalid_request"] and "PKCE" in error["error_description"][0]
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    with_pkce = base | {"code_challenge": challenge, "code_challenge_method": "S256"}
    response = requests.get(f"{oidc_settings.discovery['authorization_endpoint']}?{urlencode(with_pkce)}",
                            allow_redirects=False, timeout=TIMEOUT)
    assert "/interaction/" in response.headers["Location"]


def test_logout_ends_the_session_and_the_provider_session(live_server, oidc_settings, db):
    http = requests.Session()
    sign_in(http, live_server.url, "alice", "alice-pw")
    session_key = http.cookies["sessionid"]
    assert signed_in_user_id(http) is not None
    id_token = SessionStore(session_key=session_key)["oidc_id_token"]

    # Logout is a POST (CSRF-protected, so another site cannot sign people out with a link).
    assert http.get(f"{live_server.url}/oidc/logout/", allow_redirects=False, timeout=TIMEOUT).status_code == 405
    # Signing in rotated the CSRF cookie (django.contrib.auth.login); send it back as the header, as a page would.
    csrf = http.cookies["csrftoken"]
    response = http.post(f"{live_server.url}/oidc/logout/", headers={"X-CSRFToken": csrf},
                         allow_redirects=False, timeout=TIMEOUT)
    assert response.status_code == 302
    location = urlsplit(response.headers["Location"])
    assert f"{location.scheme}://{location.netloc}{location.path}" == oidc_settings.discovery["end_session_endpoint"]
    query = parse_qs(location.query)
    assert query["id_token_hint"] == [id_token]
    assert query["post_logout_redirect_uri"] == [f"{live_server.url}/login/"]
    assert not SessionStore().exists(session_key)
    assert http.get(f"{live_server.url}/api/v1/tenants/", timeout=TIMEOUT).status_code in {401, 403}

    # At the provider: confirm, land back on gpufleet's sign-in page.
    page = http.get(response.headers["Location"], allow_redirects=False, timeout=TIMEOUT)
    form = forms_of(page.text)[0]
    done = http.post(form["action"], data=form["fields"], allow_redirects=False, timeout=TIMEOUT)
    assert done.status_code == 303
    assert done.headers["Location"] == f"{live_server.url}/login/"
    # The provider session is gone too: signing in again asks for the password.
    trace = to_callback(http, live_server.url, "alice", "alice-pw")
    assert trace.prompts[0] == "login"


def test_portal_sign_out_goes_through_the_provider_too(live_server, oidc_settings, db):
    http = requests.Session()
    sign_in(http, live_server.url, "bob", "bob-pw")
    session_key = http.cookies["sessionid"]
    response = http.post(f"{live_server.url}/logout/", headers={"X-CSRFToken": http.cookies["csrftoken"]},
                         allow_redirects=False, timeout=TIMEOUT)
    assert response.status_code == 302
    assert response.headers["Location"].startswith(oidc_settings.discovery["end_session_endpoint"] + "?")
    assert not SessionStore().exists(session_key)


def test_a_deactivated_account_cannot_sign_in(live_server, oidc_settings, db):
    sign_in(requests.Session(), live_server.url, "bob", "bob-pw")
    get_user_model().objects.filter(username="bob").update(is_active=False)
    http = requests.Session()
    _, response = sign_in(http, live_server.url, "bob", "bob-pw")
    assert (response.status_code, response.headers["Location"]) == (302, "/login/")
    assert signed_in_user_id(http) is None


def test_wrong_password_at_the_provider_never_reaches_gpufleet(live_server, oidc_settings, db):
    with pytest.raises(AssertionError, match="login refused for bob"):
        to_callback(requests.Session(), live_server.url, "bob", "not-bobs-password")
    assert not get_user_model().objects.filter(username="bob").exists()
