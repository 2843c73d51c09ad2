"""End to end with a real Celery worker over real Redis and PostgreSQL, into a real git repository."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufleet.celery import app
from tenants import actions
from tenants.models import Phase, Tenant
from tests.gitops.helpers import git
from tests.support import factories
from tests.support.celery_worker import celery_worker, wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.service]


def wait_for_tenant(tenant_id: int, log: Path, timeout: float = 60, **expected) -> Tenant:
    def reached() -> bool:
        tenant = Tenant.objects.get(pk=tenant_id)
        return all(getattr(tenant, key) == value for key, value in expected.items())

    wait_until(f"tenant reached {expected}", reached, log, timeout)
    return Tenant.objects.get(pk=tenant_id)


def wait_for_log(log: Path, *needles: str, timeout: float = 60) -> None:
    wait_until(f"worker logged {needles}", lambda: all(n in log.read_text() for n in needles), log, timeout)


def test_request_approve_update_delete_through_a_real_worker(gitops_repo: Path, tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    with celery_worker(gitops_repo, log) as queue:
        app.conf.task_default_queue = queue
        try:
            tenant = factories.tenant("acme", "untrusted")
            actions.approve(tenant)
            ready = wait_for_tenant(tenant.pk, log, phase=Phase.READY, observed_generation=1)
            files = git(gitops_repo, "ls-files", "clusters/default/tenants/acme").split()
            assert "clusters/default/tenants/acme/namespace.core_tenant-acme.yaml" in files
            assert ready.condition("Ready")["status"] == "True"
            commits = int(git(gitops_repo, "rev-list", "--count", "HEAD"))

            # A second reconcile, delivered twice, makes no commit.
            from tenants.tasks import reconcile_tenant

            deliveries = [reconcile_tenant.delay(tenant.pk), reconcile_tenant.delay(tenant.pk)]
            # Both have run (the worker logs each outcome), not merely "some time has passed".
            wait_for_log(log, *(f"[{d.id}] succeeded" for d in deliveries))
            wait_for_tenant(tenant.pk, log, phase=Phase.READY)
            assert int(git(gitops_repo, "rev-list", "--count", "HEAD")) == commits

            actions.update(Tenant.objects.get(pk=tenant.pk), display_name="Acme research")
            wait_for_tenant(tenant.pk, log, observed_generation=2)
            assert int(git(gitops_repo, "rev-list", "--count", "HEAD")) == commits + 1
            assert "generation 2" in git(gitops_repo, "log", "-1", "--format=%s")

            actions.delete(Tenant.objects.get(pk=tenant.pk))
            wait_for_tenant(tenant.pk, log, phase=Phase.DELETED)
            assert git(gitops_repo, "ls-files", "clusters/default/tenants/acme").strip() == ""
            assert not (gitops_repo / "clusters/default/tenants" / "acme").exists()
        finally:
            app.conf.task_default_queue = "celery"
