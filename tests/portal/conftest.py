"""Portal fixtures: Django test clients signed in as a tenant owner, an outsider and a platform admin."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.support import factories


def signed_in(user) -> Client:  # type: ignore[no-untyped-def]
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def alice(db):
    return factories.user("alice")


@pytest.fixture
def bob(db):
    return factories.user("bob")


@pytest.fixture
def acme(alice):
    """A tenant owned by alice (bob is not a member)."""
    return factories.tenant("acme", "standard", owner=alice)


@pytest.fixture
def alice_client(alice) -> Client:
    return signed_in(alice)


@pytest.fixture
def bob_client(bob) -> Client:
    return signed_in(bob)


@pytest.fixture
def admin_client_(admin_user) -> Client:
    return signed_in(admin_user)
