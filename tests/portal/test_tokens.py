"""API tokens from the portal: the secret is shown exactly once, works against the API, and revokes."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from gpufleet.accounts.models import ApiToken, hash_secret
from gpufleet.audit.models import AuditEvent

pytestmark = pytest.mark.django_db

SECRET = re.compile(r'value="(gpf_[A-Za-z0-9_-]+)"')


def test_create_shows_secret_once_stores_only_its_hash_and_it_works(alice_client, alice, acme) -> None:
    response = alice_client.post(reverse("portal:tokens"), {"name": "terraform CI"}, follow=True)
    page = response.content.decode()
    secret = SECRET.search(page).group(1)
    token = ApiToken.objects.get(user=alice)
    assert token.name == "terraform CI" and token.digest == hash_secret(secret)
    assert secret.startswith(token.prefix)
    assert AuditEvent.objects.filter(action="token.create", actor_user=alice).count() == 1

    again = alice_client.get(reverse("portal:tokens")).content.decode()
    assert secret not in again, "the secret is shown exactly once"
    assert f"{token.prefix}…" in again

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    listed = api.get("/api/v1/tenants/")
    assert listed.status_code == 200 and "acme" in listed.content.decode()

    alice_client.post(reverse("portal:token-revoke", args=[token.pk]))
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert api.get("/api/v1/tenants/").status_code == 401
    assert AuditEvent.objects.filter(action="token.revoke").count() == 1
    assert ">revoked<" in alice_client.get(reverse("portal:tokens")).content.decode()


@pytest.mark.parametrize(
    ("data", "field", "reason"),
    [
        ({"name": ""}, "name", "is required"),
        ({"name": "x" * 101}, "name", "at most 100"),
        ({"name": "old", "expires_at": (timezone.now() - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M")},
         "expires_at", "in the future"),
        ({"name": "bad date", "expires_at": "yesterday"}, "expires_at", "valid date"),
    ],
)
def test_bad_token_input_creates_nothing(alice_client, data, field, reason) -> None:
    response = alice_client.post(reverse("portal:tokens"), data)
    assert response.status_code == 400
    page = response.content.decode()
    errors = page.split(f'data-field="{field}">', 1)[1].split("</ul>", 1)[0]
    assert reason in errors
    assert ApiToken.objects.count() == 0
    assert "gpf_" not in page


def test_expiring_token(alice_client, alice) -> None:
    when = (timezone.now() + timedelta(days=30)).replace(second=0, microsecond=0)
    alice_client.post(reverse("portal:tokens"), {"name": "expiring", "expires_at": when.strftime("%Y-%m-%dT%H:%M")})
    assert ApiToken.objects.get(user=alice).expires_at == when
