"""The tenant list costs a constant number of queries, however many tenants it shows."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tenants.models import Membership
from tests.support import factories

pytestmark = pytest.mark.django_db

# session, user, the user's groups (roles), tenants with the caller's role as a subquery.
MAX_QUERIES = 4
# session, user, groups, the tenant, its memberships with users, the caller's role, its audit events, its
# placements with their clusters.
DETAIL_MAX_QUERIES = 8


def _tenants(owner, count: int, start: int = 0) -> None:  # type: ignore[no-untyped-def]
    for i in range(start, start + count):
        factories.tenant(f"team-{i:03d}", "standard", owner=owner)


@pytest.mark.parametrize("count", [1, 50])
def test_member_tenant_list_queries(alice, alice_client, django_assert_max_num_queries, count) -> None:
    _tenants(alice, count)
    with django_assert_max_num_queries(MAX_QUERIES):
        page = alice_client.get(reverse("portal:tenant-list")).content.decode()
    assert page.count('href="/tenants/team-') == count


def test_admin_tenant_list_queries(alice, admin_client_, django_assert_max_num_queries) -> None:
    _tenants(alice, 50)
    with django_assert_max_num_queries(MAX_QUERIES):
        page = admin_client_.get(reverse("portal:tenant-list")).content.decode()
    assert page.count('href="/tenants/team-') == 50


def test_detail_queries_do_not_grow_with_members(alice, alice_client, acme, django_assert_max_num_queries) -> None:
    for i in range(15):
        Membership.objects.create(tenant=acme, user=factories.user(f"member-{i}"), role="member")
    with django_assert_max_num_queries(DETAIL_MAX_QUERIES):
        page = alice_client.get(reverse("portal:tenant-detail", args=["acme"])).content.decode()
    assert page.count("member-") == 15
