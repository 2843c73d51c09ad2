"""`gpufleet cohort` and the reviewed-quota verbs of `gpufleet quota` (propose, requests, preview, approve,
reject, list) against a real GitOps repository: what they print, what they write, and their errors."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from gpufleet.audit.models import AuditEvent
from scheduling.models import Cohort, Quota, QuotaChangeRequest
from tenants import actions as tenant_actions
from tenants import reconcile
from tests.gitops.helpers import git
from tests.support import factories

pytestmark = pytest.mark.django_db(transaction=True)


def cli(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_cohort_create_list_and_errors() -> None:
    assert json.loads(cli("cohort", "create", "research", "--weight", "2")) == {
        "name": "research", "parent": "", "fair_sharing_weight": "2"}
    assert json.loads(cli("cohort", "create", "vision", "--parent", "research")) == {
        "name": "vision", "parent": "research", "fair_sharing_weight": "1"}
    listed = json.loads(cli("cohort", "list"))
    assert {(c["name"], c["parent"]) for c in listed} == {("research", ""), ("vision", "research")}
    events = AuditEvent.objects.filter(action="cohort.create").count()
    assert events == 2
    for argv, message in [
        (("cohort", "create", "x1", "--parent", "nope"), "parent: unknown cohort 'nope'"),
        (("cohort", "create", "research"), "name: cohort 'research' already exists"),
        (("cohort", "create", "Bad_Name"), "name: must be lowercase"),
        (("cohort", "create", "abc\n"), "name: must not contain whitespace or control characters"),
        (("cohort", "create", "w", "--weight", "-1"), "fair_sharing_weight: must be between 0 and 1000"),
        (("cohort", "create", "w", "--weight", "lots"), "fair_sharing_weight: must be a number"),
    ]:
        with pytest.raises(CommandError, match=message):
            cli(*argv)
    assert Cohort.objects.count() == 2 and AuditEvent.objects.filter(action="cohort.create").count() == events


@pytest.fixture
def ready(fleet, gitops_repo):
    tenant = factories.tenant("vision", "standard", owner=factories.user("lead"))
    tenant_actions.approve(tenant)
    reconcile.reconcile_tenant(tenant.pk)
    return tenant


def test_quota_propose_preview_approve_reject_and_list(ready, gitops_repo, capsys) -> None:
    head = git(gitops_repo, "rev-parse", "main").strip()
    proposed = json.loads(cli("quota", "propose", "vision", "--flavor", "h100-3g", "--nominal", "7",
                              "--borrowing-limit", "3", "--reason", "new model"))
    assert proposed["state"] == "pending" and proposed["branch"] == f"quota/{proposed['id']}"
    assert proposed["nominal"] == 7 and proposed["borrowing_limit"] == 3 and proposed["reason"] == "new model"
    assert git(gitops_repo, "rev-parse", "main").strip() == head  # a proposal never touches main
    second = json.loads(cli("quota", "propose", "vision", "--flavor", "h100", "--nominal", "2"))

    assert sorted(r["id"] for r in json.loads(cli("quota", "requests"))) == [proposed["id"], second["id"]]

    preview = cli("quota", "preview", str(proposed["id"]))
    diff, _, capacity = preview.rpartition("\n{")
    assert "+        nominalQuota: 7" in diff
    assert json.loads("{" + capacity) == {"flavor": "h100-3g", "capacity": 14, "schedulable": 14,
                                          "overcommit_factor": "1.00",
                                          "held_by_other_tenants": 0, "current_nominal": 0,
                                          "requested_nominal": 7, "fits": True, "remaining_after": 7}
    assert json.loads(cli("quota", "list")) == []  # nothing applied yet

    approved = json.loads(cli("quota", "approve", str(proposed["id"]), "--comment", "ok"))
    assert approved["state"] == "approved" and approved["review_comment"] == "ok"
    assert Quota.objects.get(tenant=ready, flavor__name="h100-3g").nominal == 7
    assert json.loads(cli("quota", "list", "vision")) == [
        {"tenant": "vision", "cluster": "default", "flavor": "h100-3g", "nominal": 7, "borrowing_limit": 3,
         "lending_limit": None}]
    assert json.loads(cli("quota", "list", "nobody")) == []

    rejected = json.loads(cli("quota", "reject", str(second["id"]), "--comment", "too many"))
    assert rejected["state"] == "rejected" and rejected["review_comment"] == "too many"
    assert not Quota.objects.filter(flavor__name="h100").exists()

    with pytest.raises(CommandError, match="no quota request 9999"):
        cli("quota", "preview", "9999")
    with pytest.raises(CommandError, match="no quota request 9999"):
        cli("quota", "approve", "9999")
    with pytest.raises(CommandError):  # already decided
        cli("quota", "approve", str(second["id"]))
    with pytest.raises(CommandError, match="nominal: must not be negative"):
        cli("quota", "propose", "vision", "--flavor", "h100", "--nominal", "-1")
    with pytest.raises(CommandError, match="flavor: unknown flavor"):
        cli("quota", "propose", "vision", "--flavor", "nope", "--nominal", "1")
    with pytest.raises(CommandError):
        cli("quota", "propose", "nobody", "--flavor", "h100", "--nominal", "1")
    assert QuotaChangeRequest.objects.count() == 2
    assert dict(QuotaChangeRequest.objects.values_list("pk", "state")) == {
        proposed["id"]: "approved", second["id"]: "rejected"}
