"""The portal pages: catalog with node-pool warnings, a tenant's quota page (propose, endpoints),
the request preview and the platform admin's review; other tenants' pages are 404."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from scheduling import actions
from scheduling.models import InferenceEndpoint, Quota, QuotaChangeRequest
from tests.support import factories

pytestmark = pytest.mark.django_db


def login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_propose_preview_and_review_in_the_portal(fleet, admin_user) -> None:
    owner = factories.user("owner")
    tenant = factories.tenant("vision", "standard", owner=owner, phase="ready")
    factories.tenant("secret", "trusted", owner=factories.user("stranger"), phase="ready")
    page = login(owner)
    assert page.get("/gpu/tenants/secret/").status_code == 404
    body = page.get("/gpu/tenants/vision/").content.decode()
    # The form offers only the flavors the trust level allows.
    assert 'value="h100-3g"' in body and 'value="h100-quarter"' not in body

    bad = page.post("/gpu/tenants/vision/", {"propose": "1", "flavor": "h100", "nominal": "99"})
    assert bad.status_code == 400 and "over capacity" in bad.content.decode()
    assert not QuotaChangeRequest.objects.exists()
    ok = page.post("/gpu/tenants/vision/", {"propose": "1", "flavor": "h100", "nominal": "4", "lending_limit": "2"})
    change = QuotaChangeRequest.objects.get()
    assert ok.status_code == 302 and ok["Location"] == f"/gpu/requests/{change.pk}/"
    detail = page.get(ok["Location"]).content.decode()
    assert "ClusterQueue.kueue.x-k8s.io/-/tenant-vision" in detail and "nominalQuota: 4" in detail
    assert 'data-testid="approve"' not in detail  # owners do not review their own requests
    assert page.post(f"/gpu/requests/{change.pk}/approve/").status_code == 403

    admin = login(admin_user)
    assert 'data-testid="approve"' in admin.get(f"/gpu/requests/{change.pk}/").content.decode()
    admin.post(f"/gpu/requests/{change.pk}/approve/", {"comment": "fine"})
    change.refresh_from_db()
    assert change.state == "approved" and change.review_comment == "fine"
    assert Quota.objects.get(tenant=tenant).lending_limit == 2
    assert login(factories.user("stranger")).get(f"/gpu/requests/{change.pk}/").status_code == 404


def test_endpoint_form_and_catalog_warnings(fleet) -> None:
    owner = factories.user("owner")
    factories.tenant("serve", "standard", owner=owner, phase="ready")
    actions.create_node_pool("risky", flavor="h100", gpu_limit=4, consolidation_policy="WhenEmptyOrUnderutilized",
                             allow_underutilized=True)
    page = login(owner)
    catalog = page.get("/gpu/flavors/").content.decode()
    assert "h100-quarter" in catalog and "evict" in catalog and "/gpu/tenants/serve/" in catalog
    created = page.post("/gpu/tenants/serve/", {"endpoint": "1", "name": "chat", "model": "llama", "tier": "batch"})
    assert created.status_code == 302
    assert InferenceEndpoint.objects.get().tier.name == "batch"
    dup = page.post("/gpu/tenants/serve/", {"endpoint": "1", "name": "chat", "model": "llama", "tier": "batch"})
    assert dup.status_code == 400 and "already exists" in dup.content.decode()
    viewer = factories.user("viewer")
    from tenants.models import Membership, Tenant

    Membership.objects.create(tenant=Tenant.objects.get(slug="serve"), user=viewer, role="viewer")
    assert login(viewer).post("/gpu/tenants/serve/", {"endpoint": "1", "name": "x", "model": "m",
                                                      "tier": "batch"}).status_code == 403


def test_catalog_page_queries_do_not_grow_with_flavors(fleet, django_assert_num_queries) -> None:
    actions.create_node_pool("h100-pool", flavor="h100", gpu_limit=4)
    page = login(factories.user("reader"))
    page.get("/gpu/flavors/")  # warm: session and user rows are read the same way below
    with CaptureQueriesContext(connection) as few:
        page.get("/gpu/flavors/")
    for i in range(5):
        actions.create_flavor(f"h100-extra-{i}", gpu_model="h100-80gb", mode="whole", capacity=1)
    with django_assert_num_queries(len(few.captured_queries)):
        body = page.get("/gpu/flavors/").content.decode()
    assert "h100-extra-4" in body
    # The schedulable column counts the pool: 16 installed + 4 GPUs of the pool (scheduling/figures.py).
    assert 'data-figure="installed" data-flavor="h100">16<' in body
    assert 'data-figure="schedulable" data-flavor="h100">20<' in body


def test_a_quota_request_offers_the_cluster_and_keeps_the_current_limits(fleet) -> None:
    """Issue 28: the portal's request had no cluster field, and asking for more units with the limits left
    empty silently dropped the agreed borrowing and lending limits."""
    owner = factories.user("owner")
    tenant = factories.tenant("vision", "standard", owner=owner, phase="ready")
    actions.set_quota(tenant, flavor="h100", nominal=2, borrowing_limit=3, lending_limit=1)
    page = login(owner)
    body = page.get("/gpu/tenants/vision/").content.decode()
    assert 'name="cluster"' in body
    ok = page.post("/gpu/tenants/vision/", {"propose": "1", "flavor": "h100", "nominal": "4", "cluster": ""})
    assert ok.status_code == 302, ok.content.decode()[-2000:]
    change = QuotaChangeRequest.objects.get()
    assert (change.nominal, change.borrowing_limit, change.lending_limit) == (4, 3, 1)
