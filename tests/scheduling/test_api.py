"""Quota invariants through the API: 400 naming the field, nothing changed, nothing enqueued; scoping
per tenant (404); endpoints refuse DCGM_FI_DEV_GPU_UTIL; node-pool override warnings."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from gpufleet.audit.models import AuditEvent
from scheduling import actions
from scheduling.models import InferenceEndpoint, Quota, QuotaChangeRequest
from tenants.models import Tenant
from tests.support import factories

pytestmark = pytest.mark.django_db


def client_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def fields(response) -> set[str]:
    return {e["field"] for e in response.json()["errors"]}


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"tenant": "t-standard", "flavor": "h100", "nominal": 17}, "nominal"),  # capacity 16
        ({"tenant": "t-standard", "flavor": "h100", "nominal": 2, "lending_limit": 3}, "lending_limit"),
        ({"tenant": "t-untrusted", "flavor": "h100-3g", "nominal": 1}, "flavor"),  # MIG not allowed
        ({"tenant": "t-standard", "flavor": "h100-quarter", "nominal": 1}, "flavor"),  # HAMi not allowed
        ({"tenant": "t-standard", "flavor": "h100", "nominal": -1}, "nominal"),
        ({"tenant": "t-standard", "flavor": "h100", "nominal": 2, "borrowing_limit": -3}, "borrowing_limit"),
        ({"tenant": "t-standard", "flavor": "h100", "nominal": 1.5}, "nominal"),
        ({"tenant": "t-standard", "flavor": "nope", "nominal": 1}, "flavor"),
    ],
)
def test_invariant_violations_are_400_and_change_nothing(
    fleet, tenants, admin_api, django_capture_on_commit_callbacks, payload, field
) -> None:
    actions.set_quota(tenants["trusted"], flavor="h100", nominal=0)
    before = (list(Quota.objects.values_list("tenant__slug", "flavor__name", "nominal")), AuditEvent.objects.count(),
              list(Tenant.objects.values_list("slug", "generation")))
    with django_capture_on_commit_callbacks() as callbacks:
        response = admin_api.post("/api/v1/quotas/", payload, format="json")
        proposal = admin_api.post("/api/v1/quota-requests/", payload, format="json")
    assert response.status_code == 400, response.content
    assert field in fields(response), response.json()
    assert proposal.status_code == 400 and field in fields(proposal)
    assert callbacks == []
    after = (list(Quota.objects.values_list("tenant__slug", "flavor__name", "nominal")), AuditEvent.objects.count(),
             list(Tenant.objects.values_list("slug", "generation")))
    assert after == before
    assert QuotaChangeRequest.objects.count() == 0


def test_capacity_counts_other_tenants_and_overcommit_is_explicit(fleet, tenants, admin_api) -> None:
    assert admin_api.post("/api/v1/quotas/", {"tenant": "t-standard", "flavor": "h100", "nominal": 10},
                          format="json").status_code == 200
    over = admin_api.post("/api/v1/quotas/", {"tenant": "t-trusted", "flavor": "h100", "nominal": 7}, format="json")
    assert over.status_code == 400 and "at most 6 remain" in over.json()["detail"]
    actions.set_flavor_capacity(fleet["whole"], overcommit_factor="1.5")  # 16 x 1.5 = 24
    ok = admin_api.post("/api/v1/quotas/", {"tenant": "t-trusted", "flavor": "h100", "nominal": 7}, format="json")
    assert ok.status_code == 200, ok.content
    with pytest.raises(actions.ActionError) as err:
        actions.set_flavor_capacity(fleet["whole"], overcommit_factor="1")
    assert "overcommit_factor" in err.value.errors


def test_valid_quota_is_audited_and_enqueues_one_reconcile(fleet, tenants, admin_api,
                                                           django_capture_on_commit_callbacks) -> None:
    generation = tenants["standard"].generation
    with django_capture_on_commit_callbacks() as callbacks:
        response = admin_api.post("/api/v1/quotas/", {"tenant": "t-standard", "flavor": "h100-3g", "nominal": 7,
                                                      "borrowing_limit": 7, "lending_limit": 0}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["nominal"] == 7 and response.json()["lending_limit"] == 0
    assert len(callbacks) == 1
    assert AuditEvent.objects.filter(action="quota.set", tenant_slug="t-standard").count() == 1
    assert Tenant.objects.get(slug="t-standard").generation == generation + 1


def test_tenant_members_see_only_their_tenant(fleet, tenants) -> None:
    alice, bob = factories.user("alice"), factories.user("bob")
    a = factories.tenant("team-a", "standard", owner=alice, phase="ready")
    factories.tenant("team-b", "standard", owner=bob, phase="ready")
    actions.set_quota(a, flavor="h100", nominal=2)
    actions.set_quota(Tenant.objects.get(slug="team-b"), flavor="h100", nominal=3)
    endpoint_b = actions.create_endpoint(Tenant.objects.get(slug="team-b"), "chat", model="m", tier="batch")
    api = client_for(alice)
    assert [q["tenant"] for q in api.get("/api/v1/quotas/").json()["results"]] == ["team-a"]
    assert api.get(f"/api/v1/endpoints/{endpoint_b.pk}/").status_code == 404
    assert api.delete(f"/api/v1/endpoints/{endpoint_b.pk}/").status_code == 404
    assert InferenceEndpoint.objects.filter(pk=endpoint_b.pk).exists()
    # Proposing for, or creating endpoints in, someone else's tenant: 404 (no hint that it exists).
    assert api.post("/api/v1/quota-requests/", {"tenant": "team-b", "flavor": "h100", "nominal": 1},
                    format="json").status_code == 404
    assert api.post("/api/v1/endpoints/", {"tenant": "team-b", "name": "x", "model": "m", "tier": "batch"},
                    format="json").status_code == 404
    # Flavors are a public catalog for signed-in users; a member may not edit quotas directly.
    assert len(api.get("/api/v1/flavors/").json()["results"]) == 3
    assert api.post("/api/v1/quotas/", {"tenant": "team-a", "flavor": "h100", "nominal": 1},
                    format="json").status_code == 403
    assert APIClient().get("/api/v1/flavors/").status_code in (401, 403)


def test_endpoint_tiers_and_refused_gpu_util_trigger(fleet, tenants) -> None:
    owner = factories.user("owner")
    tenant = factories.tenant("serve", "trusted", owner=owner, phase="ready")
    api = client_for(owner)
    refused = api.post("/api/v1/endpoints/", {"tenant": tenant.slug, "name": "chat", "model": "m", "tier": "standard",
                                              "triggers": [{"metric": "DCGM_FI_DEV_GPU_UTIL"}]}, format="json")
    assert refused.status_code == 400
    assert fields(refused) == {"triggers"} and "duty cycle" in refused.json()["detail"]
    bad_tier = api.post("/api/v1/endpoints/", {"tenant": tenant.slug, "name": "chat", "model": "m", "tier": "gold"},
                        format="json")
    assert bad_tier.status_code == 400 and fields(bad_tier) == {"tier"}
    assert not InferenceEndpoint.objects.exists()
    ok = api.post("/api/v1/endpoints/", {"tenant": tenant.slug, "name": "chat", "model": "m", "tier": "standard",
                                         "triggers": ["vllm:num_requests_waiting"]}, format="json")
    assert ok.status_code == 201, ok.content
    assert ok.json()["tier"] == "standard"


def test_node_pool_api_shows_override_warning(fleet, admin_api) -> None:
    risky = {"name": "p", "flavor": "h100", "gpu_limit": 8, "consolidation_policy": "WhenEmptyOrUnderutilized"}
    refused = admin_api.post("/api/v1/node-pools/", risky, format="json")
    assert refused.status_code == 400 and fields(refused) == {"consolidation_policy"}
    ok = admin_api.post("/api/v1/node-pools/", {"name": "p", "flavor": "h100", "gpu_limit": 8,
                                                 "consolidation_policy": "WhenEmptyOrUnderutilized",
                                                 "allow_underutilized": True}, format="json")
    assert ok.status_code == 201 and ok.json()["warnings"]


def test_a_deleted_tenant_releases_its_capacity(fleet, tenants, admin_api) -> None:
    actions.set_quota(tenants["standard"], flavor="h100", nominal=16)
    full = admin_api.post("/api/v1/quotas/", {"tenant": "t-trusted", "flavor": "h100", "nominal": 1}, format="json")
    assert full.status_code == 400 and fields(full) == {"nominal"}
    Tenant.objects.filter(slug="t-standard").update(phase="deprovisioning")
    ok = admin_api.post("/api/v1/quotas/", {"tenant": "t-trusted", "flavor": "h100", "nominal": 16}, format="json")
    assert ok.status_code == 200, ok.content


def test_tenant_scheduling_settings_render_into_the_queues(fleet, tenants, admin_api) -> None:
    from scheduling.render import KUEUE
    from tenants.reconcile import desired_manifests

    actions.create_cohort("research", fair_sharing_weight="2")
    actions.create_cohort("vision-lab", parent="research")
    bad = admin_api.post("/api/v1/tenant-scheduling/", {"tenant": "t-standard", "cohort": "nope",
                                                        "priority_class": "urgent"}, format="json")
    assert bad.status_code == 400 and fields(bad) == {"cohort", "priority_class"}
    ok = admin_api.post("/api/v1/tenant-scheduling/", {"tenant": "t-standard", "cohort": "vision-lab",
                                                       "fair_sharing_weight": 3, "priority_class": "high"},
                        format="json")
    assert ok.status_code == 200, ok.content
    assert ok.json() | {"id": 0} == {"id": 0, "tenant": "t-standard", "cohort": "vision-lab",
                                      "fair_sharing_weight": "3.000", "priority_class": "high"}
    manifests = desired_manifests(Tenant.objects.get(slug="t-standard"))
    queue = next(m for m in manifests if m["kind"] == "ClusterQueue" and m["apiVersion"] == KUEUE)
    # The weight reaches KAI; Kueue's fairSharing.weight only with GPUFLEET_KUEUE_FAIR_SHARING (off here).
    assert queue["spec"]["cohortName"] == "vision-lab" and "fairSharing" not in queue["spec"]
    assert queue["spec"]["preemption"]["borrowWithinCohort"]["maxPriorityThreshold"] == 1000
    kai = next(m for m in manifests if m["kind"] == "Queue")
    assert kai["spec"]["parentQueue"] == "cohort-vision-lab" and kai["spec"]["priority"] == 1000
    assert kai["spec"]["resources"]["gpu"]["overQuotaWeight"] == 3
    cohorts = {c["name"]: c["parent"] for c in admin_api.get("/api/v1/cohorts/").json()["results"]}
    assert cohorts == {"research": None, "vision-lab": "research"}


def test_quota_requests_are_scoped_and_lists_cost_constant_queries(fleet, tenants, admin_api,
                                                                  django_assert_max_num_queries) -> None:
    alice, bob = factories.user("alice"), factories.user("bob")
    a = factories.tenant("team-a", "standard", owner=alice, phase="ready")
    b = factories.tenant("team-b", "standard", owner=bob, phase="ready")
    mine = actions.propose_quota_change(a, flavor="h100", nominal=1, proposed_by=alice)
    theirs = actions.propose_quota_change(b, flavor="h100", nominal=1, proposed_by=bob)
    api = client_for(alice)
    assert [r["id"] for r in api.get("/api/v1/quota-requests/").json()["results"]] == [mine.pk]
    for path in (f"/api/v1/quota-requests/{theirs.pk}/", f"/api/v1/quota-requests/{theirs.pk}/preview/"):
        assert api.get(path).status_code == 404
    assert api.post(f"/api/v1/quota-requests/{theirs.pk}/approve/").status_code == 404
    assert QuotaChangeRequest.objects.get(pk=theirs.pk).state == "pending"
    # Query counts do not grow with rows (NetBox-style): 2 rows vs 12 rows, same budget.
    for i in range(10):
        actions.propose_quota_change(a, flavor="h100-3g", nominal=i % 3, proposed_by=alice)
        actions.set_quota(factories.tenant(f"extra-{i}", "standard", phase="ready"), flavor="h100", nominal=0)
    for path in ("/api/v1/quota-requests/", "/api/v1/quotas/", "/api/v1/flavors/", "/api/v1/endpoints/"):
        with django_assert_max_num_queries(6):
            assert admin_api.get(path).status_code == 200


@pytest.mark.parametrize(("url", "payload", "field"), [
    ("/api/v1/quotas/", {"tenant": "t-standard", "flavor": 123, "nominal": 1}, "flavor"),
    ("/api/v1/quotas/", {"tenant": 123, "flavor": "h100", "nominal": 1}, "tenant"),
    ("/api/v1/quota-requests/", {"tenant": "t-standard", "flavor": ["h100"], "nominal": 1}, "flavor"),
    ("/api/v1/node-pools/", {"name": 5, "flavor": "h100", "gpu_limit": 1}, "name"),
    ("/api/v1/node-pools/", {"name": "pool\n", "flavor": "h100", "gpu_limit": 1}, "name"),
    ("/api/v1/endpoints/", {"tenant": "t-standard", "name": "chat\n", "model": "m", "tier": "standard"}, "name"),
    ("/api/v1/endpoints/", {"tenant": "t-standard", "name": "chat", "model": "m", "tier": 1}, "tier"),
    ("/api/v1/tenant-scheduling/", {"tenant": "t-standard", "cohort": 7}, "cohort"),
])
def test_names_are_json_strings_taken_as_sent(fleet, tenants, admin_api, django_capture_on_commit_callbacks,
                                              url, payload, field) -> None:
    """DRF's CharField would turn 123 into "123" and strip "chat\\n" to "chat"; names are taken as sent."""
    before = AuditEvent.objects.count()
    with django_capture_on_commit_callbacks() as callbacks:
        response = admin_api.post(url, payload, format="json")
    assert response.status_code == 400, response.content
    assert field in fields(response), response.json()
    assert AuditEvent.objects.count() == before and callbacks == []
