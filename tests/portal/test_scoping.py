"""Every page is scoped: anonymous → sign-in, another tenant → 404, non-admin on admin pages → 403."""

from __future__ import annotations

import pytest
from django.urls import reverse

from gpufleet.accounts.models import ApiToken
from gpufleet.audit.models import AuditEvent
from tenants.models import Phase, Tenant
from tests.support import factories

pytestmark = pytest.mark.django_db

TENANT_GETS = ["tenant-detail", "tenant-delete"]
TENANT_POSTS = [
    "tenant-rename", "tenant-delete", "tenant-approve", "tenant-reject", "tenant-suspend", "tenant-resume",
    "tenant-trust-level",
]
POST_DATA = {"display_name": "pwned", "confirm": "acme", "trust_level": "trusted", "reason": "x"}


@pytest.mark.parametrize(
    "url",
    [
        reverse("portal:home"), reverse("portal:tenant-request"), reverse("portal:approvals"),
        reverse("portal:tokens"), "/tenants/acme/", "/tenants/acme/delete/",
    ],
)
def test_anonymous_is_sent_to_sign_in(client, url) -> None:
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('portal:login')}?next={url}"


@pytest.mark.parametrize("name", TENANT_POSTS)
def test_anonymous_posts_change_nothing(client, acme, name) -> None:
    response = client.post(reverse(f"portal:{name}", args=["acme"]), POST_DATA)
    assert response.status_code == 302 and response["Location"].startswith(reverse("portal:login"))
    acme.refresh_from_db()
    assert (acme.phase, acme.display_name, acme.generation) == (Phase.REQUESTED, "acme team", 1)


@pytest.mark.parametrize("name", TENANT_GETS)
def test_member_of_another_tenant_gets_404_on_pages(bob, bob_client, acme, name) -> None:
    factories.tenant("bobs", "standard", owner=bob)
    assert bob_client.get(reverse(f"portal:{name}", args=["acme"])).status_code == 404


@pytest.mark.parametrize("name", TENANT_POSTS)
def test_member_of_another_tenant_gets_404_on_actions(bob, bob_client, acme, name) -> None:
    factories.tenant("bobs", "standard", owner=bob)
    events = AuditEvent.objects.count()
    assert bob_client.post(reverse(f"portal:{name}", args=["acme"]), POST_DATA).status_code == 404
    acme.refresh_from_db()
    assert (acme.phase, acme.display_name, acme.trust_level, acme.generation) == (
        Phase.REQUESTED, "acme team", "standard", 1
    )
    assert AuditEvent.objects.count() == events


def test_unknown_tenant_is_404_too(alice_client) -> None:
    assert alice_client.get("/tenants/no-such-tenant/").status_code == 404


def test_non_admin_gets_403_on_approvals(alice_client) -> None:
    response = alice_client.get(reverse("portal:approvals"))
    assert response.status_code == 403
    assert "only platform admins" in response.content.decode()


@pytest.mark.parametrize("name", ["tenant-approve", "tenant-reject", "tenant-suspend", "tenant-resume",
                                  "tenant-trust-level"])
def test_owner_gets_403_on_admin_actions_for_own_tenant(alice_client, acme, name) -> None:
    assert alice_client.post(reverse(f"portal:{name}", args=["acme"]), POST_DATA).status_code == 403
    acme.refresh_from_db()
    assert (acme.phase, acme.trust_level) == (Phase.REQUESTED, "standard")


def test_viewer_sees_tenant_but_cannot_change_it(db, alice, acme) -> None:
    from tenants.models import Membership

    from .conftest import signed_in

    viewer = factories.user("victor")
    Membership.objects.create(tenant=acme, user=viewer, role="viewer")
    client = signed_in(viewer)
    page = client.get(reverse("portal:tenant-detail", args=["acme"])).content.decode()
    assert reverse("portal:tenant-delete", args=["acme"]) not in page
    assert client.post(reverse("portal:tenant-rename", args=["acme"]), POST_DATA).status_code == 403
    assert client.post(reverse("portal:tenant-delete", args=["acme"]), POST_DATA).status_code == 403
    assert Tenant.objects.get(pk=acme.pk).phase == Phase.REQUESTED


def test_cannot_revoke_someone_elses_token(alice, bob_client) -> None:
    _, prefix, digest = ApiToken.generate()
    token = ApiToken.objects.create(user=alice, name="alice's", prefix=prefix, digest=digest)
    assert bob_client.post(reverse("portal:token-revoke", args=[token.pk])).status_code == 404
    token.refresh_from_db()
    assert token.revoked_at is None
    assert "alice&#x27;s" not in bob_client.get(reverse("portal:tokens")).content.decode()


def test_open_redirect_is_refused(admin_client_, acme) -> None:
    response = admin_client_.post(
        reverse("portal:tenant-approve", args=["acme"]), {"next": "https://evil.example/"}
    )
    assert response["Location"] == reverse("portal:tenant-detail", args=["acme"])
