"""Reviewed quota changes in a real GitOps repository: proposal branch, preview, approve merges exactly
one commit touching only the tenant's files; reject leaves main unchanged."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from gpufleet.audit.models import AuditEvent
from scheduling import actions
from scheduling.models import Quota, QuotaChangeRequest
from tenants import actions as tenant_actions
from tenants import reconcile
from tests.gitops.helpers import git, status
from tests.support import factories

pytestmark = pytest.mark.django_db(transaction=True)


def client_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def ready_tenant(fleet, gitops_repo):
    owner = factories.user("lead")
    tenant = factories.tenant("vision", "standard", owner=owner)
    tenant_actions.approve(tenant)
    reconcile.reconcile_tenant(tenant.pk)  # platform + tenant objects on main
    factories.tenant("other", "standard", phase="ready")
    reconcile.reconcile_tenant(factories.Tenant.objects.get(slug="other").pk)
    return tenant, owner


def test_propose_preview_approve_is_one_commit_on_main(ready_tenant, gitops_repo, admin_api, eager_tasks) -> None:
    tenant, owner = ready_tenant
    head = git(gitops_repo, "rev-parse", "main").strip()
    proposed = client_for(owner).post("/api/v1/quota-requests/", {
        "tenant": "vision", "flavor": "h100-3g", "nominal": 7, "borrowing_limit": 3, "reason": "new model"},
        format="json")
    assert proposed.status_code == 201, proposed.content
    request_id = proposed.json()["id"]
    assert proposed.json()["branch"] == f"quota/{request_id}"
    assert git(gitops_repo, "rev-parse", "main").strip() == head, "a proposal must not touch main"
    assert git(gitops_repo, "branch", "--list", f"quota/{request_id}").strip()

    preview = client_for(owner).get(f"/api/v1/quota-requests/{request_id}/preview/").json()
    # The backstop ResourceQuota's GPU keys follow the quota (nominal + borrowing).
    assert preview["objects"] == ["ClusterQueue.kueue.x-k8s.io/-/tenant-vision",
                                  "Queue.scheduling.run.ai/-/tenant-vision",
                                  "ResourceQuota.core/tenant-vision/gpufleet-backstop"]
    assert "+        nominalQuota: 7" in preview["diff"]
    assert preview["capacity"] == {"flavor": "h100-3g", "capacity": 14, "schedulable": 14, "overcommit_factor": "1.00",
                                   "held_by_other_tenants": 0, "current_nominal": 0, "requested_nominal": 7,
                                   "fits": True, "remaining_after": 7}
    # The tenant owner cannot approve their own request.
    assert client_for(owner).post(f"/api/v1/quota-requests/{request_id}/approve/").status_code == 403

    approved = admin_api.post(f"/api/v1/quota-requests/{request_id}/approve/", {"comment": "ok"}, format="json")
    assert approved.status_code == 200, approved.content
    assert approved.json()["state"] == "approved"
    commits = git(gitops_repo, "rev-list", f"{head}..main").split()
    assert len(commits) == 1, git(gitops_repo, "log", "--stat", f"{head}..main")
    touched = git(gitops_repo, "diff", "--name-only", head, "main").split()
    assert touched and all(path.startswith("clusters/default/tenants/vision/") for path in touched)
    assert QuotaChangeRequest.objects.get(pk=request_id).revision == commits[0]
    assert Quota.objects.get(tenant=tenant, flavor__name="h100-3g").nominal == 7
    assert not git(gitops_repo, "branch", "--list", f"quota/{request_id}").strip()
    actions_seen = set(AuditEvent.objects.filter(tenant_slug="vision").values_list("action", flat=True))
    assert {"quota_request.propose", "quota_request.approve"} <= actions_seen
    # A second reconcile finds main already right.
    reconcile.reconcile_tenant(tenant.pk)
    assert git(gitops_repo, "rev-parse", "main").strip() == commits[0]


def test_reject_leaves_main_unchanged(ready_tenant, gitops_repo, admin_api, eager_tasks) -> None:
    tenant, owner = ready_tenant
    head = git(gitops_repo, "rev-parse", "main").strip()
    change = actions.propose_quota_change(tenant, flavor="h100", nominal=4, proposed_by=owner)
    assert git(gitops_repo, "branch", "--list", change.branch).strip()
    rejected = admin_api.post(f"/api/v1/quota-requests/{change.pk}/reject/", {"comment": "no budget"}, format="json")
    assert rejected.status_code == 200 and rejected.json()["state"] == "rejected"
    assert rejected.json()["review_comment"] == "no budget"
    assert git(gitops_repo, "rev-parse", "main").strip() == head
    assert not status(gitops_repo).strip()
    assert not git(gitops_repo, "branch", "--list", change.branch).strip()
    assert not Quota.objects.filter(tenant=tenant).exists()
    again = admin_api.post(f"/api/v1/quota-requests/{change.pk}/approve/", format="json")
    assert again.status_code == 409


def test_second_proposal_is_reproposed_when_main_moved(ready_tenant, gitops_repo, eager_tasks) -> None:
    """Two pending proposals of one tenant: after the first merges, the second's branch no longer sits
    on main; approval re-proposes it from the database and still lands exactly one commit."""
    tenant, owner = ready_tenant
    first = actions.propose_quota_change(tenant, flavor="h100", nominal=2, proposed_by=owner)
    second = actions.propose_quota_change(tenant, flavor="h100-3g", nominal=7, proposed_by=owner)
    actions.approve_quota_change(first)
    middle = git(gitops_repo, "rev-parse", "main").strip()
    actions.approve_quota_change(second)
    commits = git(gitops_repo, "rev-list", f"{middle}..main").split()
    assert commits == [QuotaChangeRequest.objects.get(pk=second.pk).revision]
    changed = git(gitops_repo, "diff", "--name-only", middle, "main").split()
    assert all(p.startswith("clusters/default/tenants/vision/") for p in changed)
    queue = (gitops_repo / "clusters/default/tenants/vision/clusterqueue.kueue.x-k8s.io_tenant-vision.yaml").read_text()
    # Both approved quotas are on main: the re-proposal rendered the database, not the stale branch.
    assert "name: h100\n" in queue and "nominalQuota: 2" in queue and "nominalQuota: 7" in queue
    assert not git(gitops_repo, "branch", "--list", "quota/*").strip()
