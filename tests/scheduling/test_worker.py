"""The reviewed quota flow through a real Celery worker over real Redis and PostgreSQL, into a real git
repository: on-commit tasks create the proposal branch, merge it on approval (one commit touching
only the tenant's files, then a reconcile that changes nothing) and delete it on rejection."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufleet.celery import app
from scheduling import actions
from scheduling.models import QuotaChangeRequest
from tenants import actions as tenant_actions
from tenants.models import Phase, Tenant
from tests.gitops.helpers import git
from tests.support import factories
from tests.support.celery_worker import celery_worker
from tests.support.celery_worker import wait_until as wait

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.service]


def test_propose_approve_reject_through_a_real_worker(gitops_repo: Path, tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    with celery_worker(gitops_repo, log) as queue:
        app.conf.task_default_queue = queue
        try:
            model = actions.create_gpu_model("h100-80gb", "NVIDIA H100 80GB HBM3", 81559)
            actions.create_flavor("h100", gpu_model=model.name, mode="whole", capacity=8)
            owner = factories.user("lead")
            tenant = factories.tenant("vision", "standard", owner=owner)
            tenant_actions.approve(tenant)
            wait("tenant ready", lambda: Tenant.objects.filter(pk=tenant.pk, phase=Phase.READY).exists(), log)
            # A fleet pass commits its batch after marking tenants ready: wait for the files on main.
            queue_file = "clusters/default/tenants/vision/clusterqueue.kueue.x-k8s.io_tenant-vision.yaml"
            wait("tenant committed",
                 lambda: queue_file in git(gitops_repo, "ls-tree", "-r", "--name-only", "main",
                                           "clusters/default/tenants/vision"), log)
            assert (gitops_repo / "clusters/default/platform" / "resourceflavor.kueue.x-k8s.io_h100.yaml").exists()
            head = git(gitops_repo, "rev-parse", "main").strip()

            change = actions.propose_quota_change(tenant, flavor="h100", nominal=4, proposed_by=owner)
            wait("proposal branch", lambda: bool(git(gitops_repo, "branch", "--list", change.branch).strip()), log)
            assert git(gitops_repo, "rev-parse", "main").strip() == head
            assert "nominalQuota: 4" in git(gitops_repo, "diff", f"main...{change.branch}")

            actions.approve_quota_change(change, comment="ok")
            wait("merged", lambda: bool(QuotaChangeRequest.objects.get(pk=change.pk).revision), log)
            generation = Tenant.objects.get(pk=tenant.pk).generation
            wait("reconciled", lambda: Tenant.objects.get(pk=tenant.pk).observed_generation == generation, log)
            revision = QuotaChangeRequest.objects.get(pk=change.pk).revision
            assert git(gitops_repo, "rev-list", f"{head}..main").split() == [revision]
            touched = git(gitops_repo, "diff", "--name-only", head, "main").split()
            assert touched and all(p.startswith("clusters/default/tenants/vision/") for p in touched)
            assert not git(gitops_repo, "branch", "--list", change.branch).strip()

            second = actions.propose_quota_change(tenant, flavor="h100", nominal=8, proposed_by=owner)
            wait("second branch", lambda: bool(git(gitops_repo, "branch", "--list", second.branch).strip()), log)
            actions.reject_quota_change(second, comment="no")
            wait("branch discarded", lambda: not git(gitops_repo, "branch", "--list", second.branch).strip(), log)
            assert git(gitops_repo, "rev-parse", "main").strip() == revision
        finally:
            app.conf.task_default_queue = "celery"
