"""The OIDC backend's own checks and the claim sync, without a provider in the loop.

ID tokens here are signed with HS256 and the client secret (a mode mozilla-django-oidc supports), so the
issuer/audience checks can be fed tokens a real provider would never issue. The userinfo endpoint is a real
HTTP server on loopback answering with the shape a provider returns.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jwt
import pytest
from django.contrib.auth import authenticate, get_user_model
from django.core.exceptions import SuspiciousOperation
from django.test import RequestFactory

from gpufleet.accounts.models import OIDCIdentity
from gpufleet.accounts.oidc import GpufleetOIDCBackend, provider_logout_url
from gpufleet.audit.models import AuditEvent
from tenants.models import Membership
from tests.support import factories

ISSUER = "https://id.example.test"
CLIENT_ID = "gpufleet"
SECRET = "s" * 40


@pytest.fixture
def oidc_hs256(settings):
    settings.OIDC_OP_ISSUER = ISSUER
    settings.OIDC_RP_CLIENT_ID = CLIENT_ID
    settings.OIDC_RP_CLIENT_SECRET = SECRET
    settings.OIDC_RP_SIGN_ALGO = "HS256"
    settings.OIDC_OP_LOGOUT_ENDPOINT = f"{ISSUER}/session/end"
    settings.GPUFLEET_OIDC_ENABLED = True
    return settings


def id_token(**claims) -> str:
    now = int(time.time())
    body = {"iss": ISSUER, "aud": CLIENT_ID, "sub": "u-1", "iat": now, "exp": now + 300, "nonce": "n1"} | claims
    return jwt.encode({k: v for k, v in body.items() if v is not None}, SECRET, algorithm="HS256")


def test_a_good_token_passes(oidc_hs256):
    assert GpufleetOIDCBackend().verify_token(id_token(), nonce="n1")["sub"] == "u-1"
    # A trailing slash on either side is the same issuer.
    oidc_hs256.OIDC_OP_ISSUER = ISSUER + "/"
    assert GpufleetOIDCBackend().verify_token(id_token(aud=[CLIENT_ID, "other"], azp=CLIENT_ID), nonce="n1")


@pytest.mark.parametrize("bad", [
    {"iss": "https://evil.example.test"},
    {"iss": None},
    {"aud": "another-client"},
    {"aud": ["another-client", "third"]},
    {"aud": None},
    {"aud": [CLIENT_ID, "other"]},                      # several audiences but no azp
    {"aud": [CLIENT_ID, "other"], "azp": "other"},      # azp names someone else
])
def test_tokens_for_another_issuer_or_client_are_refused(oidc_hs256, bad):
    with pytest.raises(SuspiciousOperation):
        GpufleetOIDCBackend().verify_token(id_token(**bad), nonce="n1")


def test_nonce_signature_and_expiry_still_checked(oidc_hs256):
    backend = GpufleetOIDCBackend()
    with pytest.raises(SuspiciousOperation):
        backend.verify_token(id_token(), nonce="other")
    with pytest.raises(SuspiciousOperation):
        backend.verify_token(jwt.encode({"iss": ISSUER, "aud": CLIENT_ID, "sub": "x", "nonce": "n1"},
                                        "w" * 40, algorithm="HS256"), nonce="n1")
    with pytest.raises(SuspiciousOperation, match="expired"):
        backend.verify_token(id_token(exp=int(time.time()) - 10), nonce="n1")
    with pytest.raises(SuspiciousOperation, match="not yet valid"):
        backend.verify_token(id_token(iat=int(time.time()) + 600), nonce="n1")


@pytest.fixture
def userinfo_server(oidc_hs256) -> Iterator[dict]:
    """A userinfo endpoint on loopback; the test sets what it answers."""
    answer: dict = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    oidc_hs256.OIDC_OP_USER_ENDPOINT = f"http://127.0.0.1:{server.server_address[1]}/me"
    yield answer
    server.shutdown()
    server.server_close()
    thread.join()


def test_userinfo_about_another_subject_is_refused(userinfo_server):
    userinfo_server.update(sub="mallory", groups=["platform-admin"])
    with pytest.raises(SuspiciousOperation):
        GpufleetOIDCBackend().get_userinfo("access", "idt", {"sub": "u-1"})


def test_userinfo_is_merged_over_id_token_claims(userinfo_server):
    userinfo_server.update(sub="u-1", email="new@example.test")
    claims = GpufleetOIDCBackend().get_userinfo(
        "access", "idt", {"sub": "u-1", "iss": ISSUER, "nonce": "n", "groups": ["billing-admin"], "email": "old@x"}
    )
    assert claims == {"sub": "u-1", "groups": ["billing-admin"], "email": "new@example.test"}


def test_claims_create_and_update_a_user(oidc_hs256, db, django_user_model):
    acme = factories.tenant("acme")
    backend = GpufleetOIDCBackend()
    claims = {"sub": "u-1", "preferred_username": "dora", "email": "dora@example.test", "given_name": "Dora",
              "groups": ["gpufleet:acme:admin", "billing-admin"]}
    assert not backend.filter_users_by_claims(claims).exists()
    user = backend.create_user(claims)
    assert (user.username, user.email, user.first_name) == ("dora", "dora@example.test", "Dora")
    assert not user.has_usable_password()
    assert OIDCIdentity.objects.get(user=user).subject == "u-1"
    assert Membership.objects.get(tenant=acme, user=user).role == "admin"
    events = AuditEvent.objects.filter(object_id=str(user.pk), object_type="auth.user")
    assert set(events.values_list("action", flat=True)) == {"account.create", "account.roles.set"}
    assert set(events.values_list("actor_user_id", flat=True)) == {user.pk}

    # The provider renames her: the subject still finds the same account.
    renamed = {**claims, "preferred_username": "dora.m", "email": "dm@example.test", "groups": []}
    assert list(backend.filter_users_by_claims(renamed)) == [user]
    backend.update_user(user, renamed)
    user.refresh_from_db()
    assert (user.username, user.email) == ("dora", "dm@example.test")
    assert not Membership.objects.filter(user=user).exists()
    assert not user.groups.exists()
    # Another issuer's identical subject is someone else.
    oidc_hs256.OIDC_OP_ISSUER = "https://other-idp.example.test"
    assert not GpufleetOIDCBackend().filter_users_by_claims(claims).exists()


def test_a_second_sign_in_with_unchanged_claims_writes_nothing(oidc_hs256, db):
    factories.tenant("acme")
    backend = GpufleetOIDCBackend()
    claims = {"sub": "u-2", "preferred_username": "eve", "groups": ["gpufleet:acme:member", "platform-admin"]}
    user = backend.create_user(claims)
    count = AuditEvent.objects.count()
    backend.update_user(user, claims)
    assert AuditEvent.objects.count() == count


def test_groups_claim_name_is_configurable(oidc_hs256, db):
    oidc_hs256.GPUFLEET_OIDC_GROUPS_CLAIM = "gpufleet_roles"
    user = GpufleetOIDCBackend().create_user(
        {"sub": "u-3", "preferred_username": "finn", "gpufleet_roles": ["platform-admin"], "groups": ["billing-admin"]}
    )
    assert set(user.groups.values_list("name", flat=True)) == {"platform-admin"}


def test_username_falls_back_to_email_then_subject(oidc_hs256):
    backend = GpufleetOIDCBackend()
    assert backend.get_username({"sub": "s", "email": "x@example.test"}) == "x@example.test"
    assert backend.get_username({"sub": "s-123"}) == "s-123"
    assert len(backend.get_username({"sub": "s", "preferred_username": "y" * 300})) == 150


def test_claims_without_subject_are_not_enough(oidc_hs256):
    backend = GpufleetOIDCBackend()
    assert backend.verify_claims({"sub": "x"}) is True  # no e-mail needed
    assert backend.verify_claims({"email": "x@example.test"}) is False


def test_backend_ignores_password_credentials_and_disabled_provider(oidc_hs256, db):
    request = RequestFactory().get("/oidc/callback/?code=abc&state=def")
    request.session = {}
    backend = GpufleetOIDCBackend()
    # Without a PKCE verifier (only the callback passes one) nothing is exchanged, nothing is contacted.
    assert backend.authenticate(request, username="alice", password="pw") is None
    oidc_hs256.GPUFLEET_OIDC_ENABLED = False
    assert backend.authenticate(request, nonce="n", code_verifier="v" * 64) is None


def test_oidc_views_are_404_without_a_provider(client, settings):
    settings.GPUFLEET_OIDC_ENABLED = False
    assert client.get("/oidc/authenticate/").status_code == 404
    assert client.get("/oidc/callback/?code=a&state=b").status_code == 404


def test_logout_url_names_the_provider_and_the_id_token(oidc_hs256):
    request = RequestFactory().post("/oidc/logout/")
    request.session = {"oidc_id_token": "the.id.token"}
    url = provider_logout_url(request)
    assert url.startswith(f"{ISSUER}/session/end?")
    assert "id_token_hint=the.id.token" in url
    assert "post_logout_redirect_uri=http%3A%2F%2Ftestserver%2Flogin%2F" in url
    request.session = {}
    assert "id_token_hint" not in provider_logout_url(request)
    # No end-session endpoint, or no provider: back to our own sign-in page.
    oidc_hs256.OIDC_OP_LOGOUT_ENDPOINT = ""
    assert provider_logout_url(request) == "/login/"


def test_password_login_is_refused_unless_the_profile_allows_it(settings, db):
    user = factories.user("gina", password="gina-password")
    settings.GPUFLEET_PASSWORD_LOGIN = False
    assert authenticate(username="gina", password="gina-password") is None
    settings.GPUFLEET_PASSWORD_LOGIN = True
    assert authenticate(username="gina", password="gina-password") == user
    assert authenticate(username="gina", password="wrong") is None


def test_password_login_through_the_test_client(client, settings, db):
    factories.user("hugo", password="hugo-password")
    settings.GPUFLEET_PASSWORD_LOGIN = False
    assert client.login(username="hugo", password="hugo-password") is False
    settings.GPUFLEET_PASSWORD_LOGIN = True
    assert client.login(username="hugo", password="hugo-password") is True


def test_existing_sessions_and_permissions_still_work_without_password_login(client, settings, db):
    from django.contrib.auth.models import Permission

    user = factories.user("ivan")
    settings.GPUFLEET_PASSWORD_LOGIN = False
    client.force_login(user, backend="gpufleet.accounts.backends.PasswordBackend")
    assert get_user_model().objects.get(pk=int(client.session["_auth_user_id"])) == user
    assert not user.has_perm("tenants.view_tenant")
    user.user_permissions.add(Permission.objects.get(codename="view_tenant", content_type__app_label="tenants"))
    user = get_user_model().objects.get(pk=user.pk)  # permissions are cached per instance
    assert user.has_perm("tenants.view_tenant")


def test_production_profile_signs_in_through_oidc_only():
    import os
    import subprocess
    import sys

    from tests.support.services import REPO

    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "gpufleet.settings.production",
           "SECRET_KEY": "k3y-" + "0123456789abcdef" * 4,
           "ALLOWED_HOSTS": "gpufleet.example.test", "OIDC_OP_ISSUER": ISSUER, "OIDC_RP_CLIENT_ID": CLIENT_ID,
           "OIDC_RP_CLIENT_SECRET": SECRET, "PYTHONPATH": f"{REPO}{os.pathsep}{REPO / 'platform'}",
           "GPUFLEET_VCLUSTER_URL_TEMPLATE": "https://{slug}.vcluster.example.test",
           # Endpoints otherwise come lazily from the discovery document; an explicit one wins.
           "OIDC_OP_TOKEN_ENDPOINT": f"{ISSUER}/token"}
    code = ("import django, json; django.setup(); from django.conf import settings as s; "
            "print(json.dumps([s.GPUFLEET_PASSWORD_LOGIN, s.GPUFLEET_OIDC_ENABLED, s.OIDC_OP_TOKEN_ENDPOINT, "
            "s.AUTHENTICATION_BACKENDS]))")
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    password_login, enabled, token_endpoint, backends = json.loads(out.stdout.strip().splitlines()[-1])
    assert (password_login, enabled, token_endpoint) == (False, True, f"{ISSUER}/token")
    assert "django.contrib.auth.backends.ModelBackend" not in backends


def test_portal_sign_out_without_a_provider_ends_the_session(client, settings, db):
    settings.GPUFLEET_OIDC_ENABLED = False
    client.force_login(factories.user("jane"))
    assert client.post("/logout/").headers["Location"] == "/login/"
    assert "_auth_user_id" not in client.session
