"""An idempotent POST never keeps a secret at rest, and a replay never brings a revoked token back (issue 27,
item 2). The token's secret is shown once, in the first answer; the stored answer has it removed, and a replay
is a problem naming why (409 while the token lives, 410 once it is revoked)."""

from __future__ import annotations

import json

import pytest

from gpufleet.api.models import IdempotencyKey
from tests.support import factories

pytestmark = pytest.mark.django_db
TOKENS = "/api/v1/tokens/"


def test_the_stored_answer_of_a_token_creation_holds_no_secret(api):
    api.force_authenticate(factories.user("alice"))
    first = api.post(TOKENS, {"name": "ci"}, format="json", HTTP_IDEMPOTENCY_KEY="tok-1")
    assert first.status_code == 201
    secret = first.json()["token"]
    row = IdempotencyKey.objects.get(key="tok-1")
    assert row.status == 201
    assert secret not in json.dumps(row.response_body)
    assert "token" not in row.response_body and row.response_body["id"] == first.json()["id"]


def test_a_replay_names_why_the_secret_is_not_shown_again(api):
    api.force_authenticate(factories.user("alice"))
    first = api.post(TOKENS, {"name": "ci"}, format="json", HTTP_IDEMPOTENCY_KEY="tok-1").json()
    replay = api.post(TOKENS, {"name": "ci"}, format="json", HTTP_IDEMPOTENCY_KEY="tok-1")
    assert replay.status_code == 409 and replay["Content-Type"] == "application/problem+json"
    body = replay.json()
    assert body["error"] == "idempotency_secret_withheld"
    assert first["token"] not in replay.content.decode()
    assert "shown once" in body["detail"] and first["prefix"] in body["detail"]
    assert api.get(TOKENS).json()["results"][0]["active"] is True  # still the one token


def test_a_replay_after_revocation_does_not_resurrect_the_token(api):
    api.force_authenticate(factories.user("alice"))
    first = api.post(TOKENS, {"name": "ci"}, format="json", HTTP_IDEMPOTENCY_KEY="tok-1").json()
    assert api.delete(f"{TOKENS}{first['id']}/").status_code == 204
    replay = api.post(TOKENS, {"name": "ci"}, format="json", HTTP_IDEMPOTENCY_KEY="tok-1")
    assert replay.status_code == 410 and replay["Content-Type"] == "application/problem+json"
    assert replay.json()["error"] == "idempotency_token_revoked" and "revoked" in replay.json()["detail"]
    assert "active" not in replay.json() and first["token"] not in replay.content.decode()
    listed = api.get(TOKENS).json()["results"]
    assert [(t["id"], t["active"]) for t in listed] == [(first["id"], False)]
    # The revoked secret does not authenticate either.
    api.force_authenticate(None)
    assert api.get(TOKENS, HTTP_AUTHORIZATION=f"Bearer {first['token']}").status_code == 401


def test_answers_without_a_secret_are_still_replayed_as_they_were(admin_api):
    body = {"slug": "vision", "trust_level": "standard"}
    first = admin_api.post("/api/v1/tenants/", body, format="json", HTTP_IDEMPOTENCY_KEY="t-1")
    again = admin_api.post("/api/v1/tenants/", body, format="json", HTTP_IDEMPOTENCY_KEY="t-1")
    assert again.status_code == 201 and again.json() == first.json() and again["Idempotent-Replayed"] == "true"
