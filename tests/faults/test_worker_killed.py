"""A worker killed with SIGKILL (its whole process group) mid-task: another worker redoes the work within 60 s.

Delivery settings (platform/gpufleet/settings/base.py, docs/operations.md): acks_late, so the message
is still unacknowledged in Redis when the worker dies; a visibility timeout of 30 s with the restore
check every 5 s, so a surviving worker puts it back on the queue. Before, the timeout was Redis
transport's default of one hour, and only beat's five-minute sweep repaired tenants.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import psycopg
import pytest
from django.db import connection

from gpufleet.celery import app
from tenants import actions
from tenants.models import Phase, Tenant
from tests.support import factories
from tests.support.celery_worker import celery_worker, kill_group, wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.service]


def _dsn() -> str:
    db = connection.settings_dict
    return (f"host={db['HOST'] or '127.0.0.1'} port={db['PORT'] or 5432} "
            f"user={db['USER'] or 'postgres'} dbname={db['NAME']}")


def test_a_lost_worker_s_task_is_redone_by_another_worker_within_60_seconds(gitops_repo: Path,
                                                                              tmp_path: Path) -> None:
    tenant = factories.tenant("acme", "standard")
    first_log, second_log = tmp_path / "worker-1.log", tmp_path / "worker-2.log"
    # Hold the tenants table so the first worker's reconcile blocks inside the task (mid-task, unacked).
    blocker = psycopg.connect(_dsn(), autocommit=False)
    queue = f"test-kill-{tenant.pk}-{int(time.time())}"
    app.conf.task_default_queue = queue
    try:
        actions.approve(tenant)  # reconcile_tenant waits in the queue: no worker yet
    finally:
        app.conf.task_default_queue = "celery"
    try:
        with blocker.cursor() as cursor:
            cursor.execute("LOCK TABLE tenants_tenant IN ACCESS EXCLUSIVE MODE")
        with celery_worker(gitops_repo, first_log, queue=queue, pool="prefork", own_session=True):
            # (pg_stat_activity is a per-transaction snapshot: look from a separate autocommit session.)
            with psycopg.connect(_dsn(), autocommit=True) as observer, observer.cursor() as cursor:
                wait_until("the first worker waits inside the task", lambda: _waiting(cursor), first_log, 60)
            assert "tenants.reconcile_tenant" in first_log.read_text()
            kill_group(queue)
            killed_at = time.monotonic()
        blocker.rollback()  # release the table: the killed worker never acknowledged its message
        assert Tenant.objects.get(pk=tenant.pk).phase == Phase.APPROVED
        with celery_worker(gitops_repo, second_log, queue=queue):
            wait_until("a second worker finished the lost reconcile",
                       lambda: Tenant.objects.filter(pk=tenant.pk, phase=Phase.READY).exists(), second_log,
                       timeout=60 - (time.monotonic() - killed_at))
            recovered = time.monotonic() - killed_at
    finally:
        blocker.close()
    assert recovered < 60, recovered
    ready = Tenant.objects.get(pk=tenant.pk)
    assert ready.observed_generation == ready.generation
    # The very message the first worker held (same task id) ran on the second worker.
    task_id = re.search(r"tenants\.reconcile_tenant\[([0-9a-f-]+)\] received", first_log.read_text())
    assert task_id, first_log.read_text()[-2000:]
    assert f"tenants.reconcile_tenant[{task_id.group(1)}] succeeded" in second_log.read_text()
    print(f"lost task redone {recovered:.1f}s after SIGKILL")


def _waiting(cursor: psycopg.Cursor) -> bool:
    cursor.execute("SELECT count(*) FROM pg_stat_activity "
                   "WHERE wait_event_type = 'Lock' AND datname = current_database()")
    return cursor.fetchone()[0] > 0
