"""The beat entry point by name, on a real Celery worker over real Redis and PostgreSQL."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from gpufleet.celery import app
from scheduling.models import SyncRun
from tenants import actions, reconcile
from tests.support import factories
from tests.support.celery_worker import celery_worker
from tests.support.services import need_binary, need_reference

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.service]


def test_worker_runs_sync_fleet_by_name_and_repairs_drift(gitops_repo: Path, tmp_path: Path) -> None:
    need_binary("git")
    need_reference()
    tenant = factories.tenant("acme", "standard")
    actions.approve(tenant)
    reconcile.reconcile_tenant(tenant.pk)
    victim = gitops_repo / "clusters/default/tenants/acme/namespace.core_tenant-acme.yaml"
    original = victim.read_bytes()
    victim.unlink()

    log = tmp_path / "worker.log"
    with celery_worker(gitops_repo, log) as queue:
        # By name, as beat sends it: proves the worker registered scheduling.sync_fleet on its own.
        app.send_task("scheduling.sync_fleet", queue=queue)
        deadline = time.monotonic() + 90
        run = None
        while time.monotonic() < deadline:
            run = SyncRun.objects.filter(finished__isnull=False).first()
            if run:
                break
            time.sleep(0.3)
        assert run is not None, f"no finished SyncRun; worker log:\n{log.read_text()[-4000:]}"

    assert run.state == SyncRun.State.OK, run.errors
    assert run.drift_count == 1 and run.drifted == ["clusters/default/tenants/acme/namespace.core_tenant-acme.yaml"]
    assert victim.read_bytes() == original
