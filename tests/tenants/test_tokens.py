"""API tokens: shown once, hashed at rest, revocable, scoped to their user."""

from __future__ import annotations

import pytest

from gpufleet.accounts.models import ApiToken
from tests.support import factories

pytestmark = pytest.mark.django_db


def test_token_lifecycle(api):
    alice = factories.user("alice")
    factories.tenant("team-a", owner=alice)
    api.force_authenticate(alice)
    created = api.post("/api/v1/tokens/", {"name": "terraform"}, format="json")
    assert created.status_code == 201
    secret = created.json()["token"]
    assert secret.startswith("gpf_")
    stored = ApiToken.objects.get()
    assert secret not in (stored.digest, stored.prefix) and len(stored.digest) == 64
    assert "token" not in api.get(f"/api/v1/tokens/{stored.pk}/").json()  # never shown again

    bearer = factories_client(secret)
    listing = bearer.get("/api/v1/tenants/")
    assert listing.status_code == 200 and [t["slug"] for t in listing.json()["results"]] == ["team-a"]

    assert api.delete(f"/api/v1/tokens/{stored.pk}/").status_code == 204
    assert bearer.get("/api/v1/tenants/").status_code == 401
    assert factories_client("gpf_not-a-real-token").get("/api/v1/tenants/").status_code == 401


def test_users_cannot_see_or_revoke_each_others_tokens(api):
    alice, bob = factories.user("alice"), factories.user("bob")
    api.force_authenticate(alice)
    token_id = api.post("/api/v1/tokens/", {"name": "ci"}, format="json").json()["id"]
    api.force_authenticate(bob)
    assert api.get("/api/v1/tokens/").json()["results"] == []
    assert api.delete(f"/api/v1/tokens/{token_id}/").status_code == 404
    assert ApiToken.objects.get(pk=token_id).revoked_at is None


def test_token_actions_are_audited_as_the_token(api):
    from gpufleet.audit.models import AuditEvent

    alice = factories.user("alice")
    api.force_authenticate(alice)
    secret = api.post("/api/v1/tokens/", {"name": "tf"}, format="json").json()["token"]
    bearer = factories_client(secret)
    created = bearer.post("/api/v1/tenants/", {"slug": "acme", "trust_level": "standard"}, format="json")
    assert created.status_code == 201
    event = AuditEvent.objects.get(action="tenant.request")
    assert event.actor_user == alice
    assert event.actor_token_id == ApiToken.objects.get().pk


def factories_client(secret: str):
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client
