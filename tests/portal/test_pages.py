"""Every portal page renders for the people who may see it, and shows what it promises."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tenants import actions, reconcile
from tenants.models import Phase
from tests.support import factories

pytestmark = pytest.mark.django_db


def test_login_page_offers_password_form_in_test_profile(client, settings) -> None:
    settings.GPUFLEET_OIDC_ENABLED = False
    page = client.get(reverse("portal:login")).content.decode()
    assert 'name="username"' in page and 'name="password"' in page
    assert "Sign in with your organisation" not in page


def test_login_page_offers_oidc_button_and_hides_password_form_outside_demo(client, settings) -> None:
    settings.GPUFLEET_OIDC_ENABLED = True
    settings.GPUFLEET_PASSWORD_LOGIN = False
    page = client.get(reverse("portal:login")).content.decode()
    assert "Sign in with your organisation (OIDC)" in page
    assert reverse("oidc_authentication_init") in page
    assert 'name="password"' not in page


def test_password_post_refused_when_password_login_is_off(client, settings, alice) -> None:
    settings.GPUFLEET_PASSWORD_LOGIN = False
    response = client.post(reverse("portal:login"), {"username": "alice", "password": "pw-for-tests"})
    assert response.status_code == 403
    assert "_auth_user_id" not in client.session


def test_login_page_never_hides_both_ways_in_silence(client, settings) -> None:
    settings.GPUFLEET_OIDC_ENABLED = False
    settings.GPUFLEET_PASSWORD_LOGIN = False
    page = client.get(reverse("portal:login")).content.decode()
    assert "Sign-in is not configured" in page and "OIDC_OP_ISSUER" in page


def test_password_sign_in_and_sign_out(client, alice) -> None:
    response = client.post(reverse("portal:login"), {"username": "alice", "password": "pw-for-tests"})
    assert response.status_code == 302 and response["Location"] == reverse("portal:home")
    home = client.get(reverse("portal:home")).content.decode()
    assert 'data-testid="signed-in-user">alice<' in home
    assert client.get(reverse("portal:logout")).status_code == 405, "sign out is POST only"
    assert client.post(reverse("portal:logout")).status_code == 302
    assert client.get(reverse("portal:home")).status_code == 302


def test_wrong_password_shows_error_and_signs_nobody_in(client, alice) -> None:
    response = client.post(reverse("portal:login"), {"username": "alice", "password": "nope"})
    assert response.status_code == 200
    assert "Please enter a correct username and password" in response.content.decode()
    assert "_auth_user_id" not in client.session


def test_base_shows_user_and_roles(admin_client_) -> None:
    page = admin_client_.get(reverse("portal:home")).content.decode()
    assert 'data-testid="signed-in-user">root-admin<' in page
    assert '<span class="role-chip">platform-admin</span>' in page
    assert '<span class="role-chip">billing-admin</span>' not in page, "implied roles are not listed twice"
    assert reverse("portal:approvals") in page


def test_billing_admin_sees_role_but_no_approvals(db) -> None:
    from .conftest import signed_in

    page = signed_in(factories.user("bill", roles={"billing-admin"})).get(reverse("portal:home")).content.decode()
    assert '<span class="role-chip">billing-admin</span>' in page
    assert reverse("portal:approvals") not in page


def test_non_admin_nav_has_no_approvals(alice_client) -> None:
    page = alice_client.get(reverse("portal:home")).content.decode()
    assert reverse("portal:approvals") not in page
    assert "role-chip" not in page


def test_my_tenants_lists_only_mine_with_my_role(alice_client, acme, bob) -> None:
    factories.tenant("other", "standard", owner=bob)
    page = alice_client.get(reverse("portal:tenant-list")).content.decode()
    assert reverse("portal:tenant-detail", args=["acme"]) in page
    assert "other" not in page
    assert "<td>owner</td>" in page


def test_request_page_renders(alice_client) -> None:
    page = alice_client.get(reverse("portal:tenant-request")).content.decode()
    assert 'name="slug"' in page and 'name="trust_level"' in page and "untrusted" in page


def test_tenant_detail_of_requested_tenant(alice_client, acme) -> None:
    page = alice_client.get(reverse("portal:tenant-detail", args=["acme"])).content.decode()
    assert "Waiting for a platform admin&#x27;s approval" in page
    assert ">requested<" in page
    assert "alice" in page and "owner" in page  # members
    assert "tenant.request" in page  # audit events
    assert "Nothing applied yet" in page
    # Owner actions, but no platform-admin actions.
    assert reverse("portal:tenant-delete", args=["acme"]) in page
    assert reverse("portal:tenant-rename", args=["acme"]) in page
    assert reverse("portal:tenant-approve", args=["acme"]) not in page
    assert reverse("portal:tenant-trust-level", args=["acme"]) not in page


def test_tenant_detail_after_reconcile_shows_objects_and_live_generation(alice_client, acme) -> None:
    actions.approve(acme)
    reconcile.reconcile_tenant(acme.pk)
    acme.refresh_from_db()
    assert acme.phase == Phase.READY
    page = alice_client.get(reverse("portal:tenant-detail", args=["acme"])).content.decode()
    assert "Your latest change is live: generation 1 has been applied." in page
    assert 'data-testid="owned-objects"' in page
    assert "<td>Namespace</td>" in page and "<code>tenant-acme</code>" in page
    assert "<td>HelmRelease</td>" in page
    assert "Applied" in page  # the Ready condition's reason
    stamp = acme.condition("Ready")["lastTransitionTime"]
    assert f"<td class=\"nowrap small\">{stamp[:10]} {stamp[11:19]}</td>" in page, "condition time shown in UTC"

    actions.update(acme, display_name="Acme GPUs")
    page = alice_client.get(reverse("portal:tenant-detail", args=["acme"])).content.decode()
    assert "Your latest change (generation 2) is not live yet; generation 1 is what runs now." in page


def test_tenant_detail_shows_admin_actions_to_platform_admin(admin_client_, acme) -> None:
    page = admin_client_.get(reverse("portal:tenant-detail", args=["acme"])).content.decode()
    for name in ("tenant-approve", "tenant-reject", "tenant-trust-level"):
        assert reverse(f"portal:{name}", args=["acme"]) in page


def test_approvals_page_lists_requested_tenants_only(admin_client_, alice, acme) -> None:
    ready = factories.tenant("ready-one", "standard", owner=alice, phase=Phase.READY)
    page = admin_client_.get(reverse("portal:approvals")).content.decode()
    assert 'data-slug="acme"' in page
    assert f'data-slug="{ready.slug}"' not in page
    assert "alice" in page  # requested by


def test_tokens_page_renders(alice_client) -> None:
    page = alice_client.get(reverse("portal:tokens")).content.decode()
    assert "No tokens yet." in page and 'name="name"' in page


def test_static_stylesheet_is_served_locally(alice_client) -> None:
    page = alice_client.get(reverse("portal:home")).content.decode()
    assert "/static/portal/portal.css" in page
    assert "http://" not in page and "https://" not in page, "no external assets"


def test_condition_with_many_problems_is_listed_one_per_line(alice_client, acme) -> None:
    from tenants.actions import _condition
    from tenants.models import Tenant

    problems = [f"CiliumNetworkPolicy/{i}: spec is not valid" for i in range(3)]
    conditions = [
        _condition("Ready", "False", "InvalidManifest", "; ".join(problems)),
        _condition("Secrets", "False", "NotConfigured", "OpenBao is not configured; secrets step skipped"),
    ]
    Tenant.objects.filter(pk=acme.pk).update(phase=Phase.FAILED, conditions=conditions)
    page = alice_client.get(reverse("portal:tenant-detail", args=["acme"])).content.decode()
    for problem in problems:
        assert f"<li>{problem}</li>" in page
    assert "OpenBao is not configured; secrets step skipped" in page
    assert "The last apply failed" in page
