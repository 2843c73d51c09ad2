"""Who may grant which tenant role (issue 27, item 1).

Rule: nobody grants a role above their own, and only owners and platform admins change or remove an owner;
a role that comes from the identity provider's groups (`gpufleet:<tenant>:<role>`, source "oidc") is changed
at the provider, never overridden here (it would otherwise survive the person's next sign-in).
"""

from __future__ import annotations

import pytest

from gpufleet.accounts.actions import sync_oidc_user
from tenants import actions
from tenants.models import Membership
from tests.support import factories

pytestmark = pytest.mark.django_db
MEMBERS = "/api/v1/members/"


@pytest.fixture
def team():
    owner, admin, member = factories.user("olga"), factories.user("adam"), factories.user("mia")
    tenant = factories.tenant("vision", owner=owner, members={"admin": admin, "member": member})
    return tenant, owner, admin, member


def _id(tenant, user) -> int:
    return Membership.objects.get(tenant=tenant, user=user).pk


def test_an_admin_cannot_make_themselves_or_anyone_owner(api, team):
    tenant, _owner, admin, member = team
    api.force_authenticate(admin)
    own = api.patch(f"{MEMBERS}{_id(tenant, admin)}/", {"role": "owner"}, format="json")
    assert own.status_code == 403 and own["Content-Type"] == "application/problem+json"
    assert "above your own" in own.json()["detail"]
    other = api.patch(f"{MEMBERS}{_id(tenant, member)}/", {"role": "owner"}, format="json")
    assert other.status_code == 403
    newcomer = factories.user("nina")
    # Someone the admin may add (they share another tenant: no username enumeration, issue 27 item 10).
    factories.tenant("side", owner=admin, members={"member": newcomer})
    added = api.post(MEMBERS, {"tenant": "vision", "user": "nina", "role": "owner"}, format="json")
    assert added.status_code == 403
    assert not Membership.objects.filter(user=newcomer, tenant=tenant).exists()
    assert Membership.objects.get(tenant=tenant, user=admin).role == "admin"
    assert Membership.objects.get(tenant=tenant, user=member).role == "member"
    # Up to their own rank is theirs to give.
    assert api.patch(f"{MEMBERS}{_id(tenant, member)}/", {"role": "admin"}, format="json").status_code == 200


def test_an_admin_cannot_demote_or_remove_an_owner(api, team):
    tenant, owner, admin, _member = team
    second = factories.user("oscar")
    actions.add_member(tenant, second, "owner")
    api.force_authenticate(admin)
    demote = api.patch(f"{MEMBERS}{_id(tenant, owner)}/", {"role": "viewer"}, format="json")
    assert demote.status_code == 403 and "owner" in demote.json()["detail"]
    assert api.delete(f"{MEMBERS}{_id(tenant, second)}/").status_code == 403
    assert Membership.objects.filter(tenant=tenant, role="owner").count() == 2
    # An owner may; so may a platform admin.
    api.force_authenticate(owner)
    assert api.patch(f"{MEMBERS}{_id(tenant, second)}/", {"role": "admin"}, format="json").status_code == 200
    api.force_authenticate(factories.user("root", roles={"platform-admin"}))
    assert api.patch(f"{MEMBERS}{_id(tenant, second)}/", {"role": "owner"}, format="json").status_code == 200


def test_a_role_from_the_identity_provider_is_not_overridden_locally(api, team):
    tenant, owner, admin, _member = team
    idp_owner = factories.user("ida")
    claims = {"sub": "ida", "groups": ["gpufleet:vision:owner"]}
    sync_oidc_user(idp_owner, claims, groups_claim="groups")
    membership = Membership.objects.get(tenant=tenant, user=idp_owner)
    assert (membership.role, membership.source) == ("owner", "oidc")
    api.force_authenticate(owner)
    assert api.get(f"{MEMBERS}{membership.pk}/").json()["source"] == "oidc"

    for actor in (admin, owner, factories.user("root", roles={"platform-admin"})):
        api.force_authenticate(actor)
        demote = api.patch(f"{MEMBERS}{membership.pk}/", {"role": "viewer"}, format="json")
        assert demote.status_code in (403, 409), (actor, demote.content)
        assert api.delete(f"{MEMBERS}{membership.pk}/").status_code in (403, 409)
    api.force_authenticate(owner)
    refused = api.patch(f"{MEMBERS}{membership.pk}/", {"role": "viewer"}, format="json")
    assert refused.status_code == 409 and "identity provider" in refused.json()["detail"]
    assert "gpufleet:vision:owner" in refused.json()["detail"]

    # The next sign-in still finds the provider's role in charge.
    sync_oidc_user(idp_owner, claims, groups_claim="groups")
    membership.refresh_from_db()
    assert (membership.role, membership.source) == ("owner", "oidc")


def test_the_rule_lives_in_the_action_for_every_caller(team):
    tenant, _owner, admin, member = team
    with pytest.raises(actions.Forbidden):
        actions.change_member_role(Membership.objects.get(tenant=tenant, user=member), "owner", by=admin)
    with pytest.raises(actions.Forbidden):
        actions.add_member(tenant, factories.user("zed"), "owner", by=admin)
    assert Membership.objects.get(tenant=tenant, user=member).role == "member"


def test_the_members_page_says_where_a_role_comes_from(client, team):
    tenant, owner, _admin, _member = team
    sync_oidc_user(factories.user("ida"), {"sub": "ida", "groups": ["gpufleet:vision:viewer"]}, groups_claim="groups")
    client.force_login(owner)
    page = client.get(f"/tenants/{tenant.slug}/").content.decode()
    assert "group gpufleet:vision:viewer; changed at the identity provider" in page
