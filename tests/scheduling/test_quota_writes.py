"""Quota writes never lose limits nobody meant to change (issue 27, item 4).

- `PATCH /api/v1/quotas/{id}/` changes only the fields sent and honours If-Match;
- `POST /api/v1/quotas/` is create-or-replace (documented) and refuses If-Match rather than ignore it;
- the portal's quota request keeps the current limits when its limit fields are left empty.
"""

from __future__ import annotations

import pytest
from django.test import Client
from rest_framework.test import APIClient

from scheduling import actions
from scheduling.models import Quota, QuotaChangeRequest
from tests.support import factories

pytestmark = pytest.mark.django_db
QUOTAS = "/api/v1/quotas/"


@pytest.fixture
def quota(fleet):
    tenant = factories.tenant("vision", "standard", owner=factories.user("owner"), phase="ready")
    return actions.set_quota(tenant, flavor="h100", nominal=4, borrowing_limit=2, lending_limit=1)


def _numbers(quota: Quota) -> tuple[int, int | None, int | None]:
    quota.refresh_from_db()
    return quota.nominal, quota.borrowing_limit, quota.lending_limit


def test_a_patch_changes_only_the_fields_sent(admin_api: APIClient, quota: Quota) -> None:
    changed = admin_api.patch(f"{QUOTAS}{quota.pk}/", {"nominal": 6}, format="json")
    assert changed.status_code == 200, changed.content
    assert (changed.json()["nominal"], changed.json()["borrowing_limit"], changed.json()["lending_limit"]) == (6, 2, 1)
    assert _numbers(quota) == (6, 2, 1)
    assert admin_api.patch(f"{QUOTAS}{quota.pk}/", {"borrowing_limit": None}, format="json").status_code == 200
    assert _numbers(quota) == (6, None, 1)  # null, sent, is "no limit"
    bad = admin_api.patch(f"{QUOTAS}{quota.pk}/", {"lending_limit": 7}, format="json")
    assert bad.status_code == 400 and "must not exceed the nominal quota" in bad.json()["fields"]["lending_limit"][0]
    moved = admin_api.patch(f"{QUOTAS}{quota.pk}/", {"flavor": "h100-3g"}, format="json")
    assert moved.status_code == 400 and moved.json()["fields"] == {"flavor": ["is immutable"]}
    assert _numbers(quota) == (6, None, 1)


def test_a_patch_honours_if_match(admin_api: APIClient, quota: Quota) -> None:
    etag = admin_api.get(f"{QUOTAS}{quota.pk}/")["ETag"]
    first = admin_api.patch(f"{QUOTAS}{quota.pk}/", {"nominal": 5}, format="json", HTTP_IF_MATCH=etag)
    assert first.status_code == 200 and first["ETag"] != etag
    stale = admin_api.patch(f"{QUOTAS}{quota.pk}/", {"nominal": 8}, format="json", HTTP_IF_MATCH=etag)
    assert stale.status_code == 412
    assert _numbers(quota) == (5, 2, 1)


def test_a_patch_is_for_platform_admins(api: APIClient, quota: Quota) -> None:
    api.force_authenticate(quota.tenant.memberships.get().user)  # the tenant's owner
    assert api.patch(f"{QUOTAS}{quota.pk}/", {"nominal": 8}, format="json").status_code == 403
    assert _numbers(quota) == (4, 2, 1)


def test_a_post_replaces_and_refuses_if_match(admin_api: APIClient, quota: Quota) -> None:
    etag = admin_api.get(f"{QUOTAS}{quota.pk}/")["ETag"]
    body = {"tenant": "vision", "flavor": "h100", "nominal": 6}
    conditional = admin_api.post(QUOTAS, body, format="json", HTTP_IF_MATCH=etag)
    assert conditional.status_code == 400 and "If-Match" in conditional.json()["fields"]
    assert _numbers(quota) == (4, 2, 1)
    # Create-or-replace, as docs/api.md says: what is not sent is "no limit".
    assert admin_api.post(QUOTAS, body, format="json").status_code == 200
    assert _numbers(quota) == (6, None, None)


def test_the_portal_request_keeps_limits_left_empty(quota: Quota) -> None:
    page = Client()
    page.force_login(quota.tenant.memberships.get().user)
    sent = page.post("/gpu/tenants/vision/", {"propose": "1", "flavor": "h100", "nominal": "6",
                                              "borrowing_limit": "", "lending_limit": ""})
    assert sent.status_code == 302, sent.content.decode()
    change = QuotaChangeRequest.objects.get()
    assert (change.nominal, change.borrowing_limit, change.lending_limit) == (6, 2, 1)
    actions.approve_quota_change(change)
    assert _numbers(quota) == (6, 2, 1)
    # "none" asks for no limit explicitly.
    page.post("/gpu/tenants/vision/", {"propose": "1", "flavor": "h100", "nominal": "6", "borrowing_limit": "none"})
    latest = QuotaChangeRequest.objects.order_by("-pk").first()
    assert (latest.borrowing_limit, latest.lending_limit) == (None, 1)


def test_the_cli_keeps_limits_not_given(quota: Quota) -> None:
    from io import StringIO

    from django.core.management import call_command

    call_command("quota", "set", "vision", "--flavor", "h100", "--nominal", "5", stdout=StringIO())
    assert _numbers(quota) == (5, 2, 1)
    call_command("quota", "set", "vision", "--flavor", "h100", "--nominal", "5", "--borrowing-limit", "none",
                 stdout=StringIO())
    assert _numbers(quota) == (5, None, 1)
