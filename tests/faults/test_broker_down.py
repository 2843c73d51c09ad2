"""Redis (the broker) is down while users write: the writes stand, the work runs when Redis is back.

Before gpufleet.outbox, approve / PATCH / quota set answered 500 (kombu OperationalError from
`.delay()` in an on-commit hook) although the database write had been committed.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from gpufleet.audit.models import AuditEvent
from gpufleet.celery import app
from gpufleet.outbox.models import OutboxMessage
from scheduling import actions as scheduling_actions
from scheduling.models import Quota
from tenants.models import Phase, Tenant
from tests.support import factories
from tests.support.celery_worker import celery_worker, wait_until
from tests.support.redis_server import redis_server
from tests.support.services import free_port

from .conftest import publishing_to

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.service]


def test_writes_succeed_with_the_broker_down_and_run_when_it_is_back(admin_api, gitops_repo: Path,
                                                                      tmp_path: Path) -> None:
    port = free_port()  # nothing listens here yet: the broker is unreachable
    broker = f"redis://127.0.0.1:{port}/0"
    model = scheduling_actions.create_gpu_model("h100-80gb", "NVIDIA H100 80GB HBM3", 81559, "NVIDIA-H100-80GB-HBM3")
    scheduling_actions.create_flavor("h100", gpu_model=model.name, mode="whole", capacity=16)
    tenant = factories.tenant("acme", "standard")
    events = AuditEvent.objects.count()

    with publishing_to(broker):
        started = time.monotonic()
        approved = admin_api.post(f"/api/v1/tenants/{tenant.pk}/approve/")
        patched = admin_api.patch(f"/api/v1/tenants/{tenant.pk}/", {"display_name": "Acme research"}, format="json")
        quota = admin_api.post("/api/v1/quotas/", {"tenant": "acme", "flavor": "h100", "nominal": 4}, format="json")
        elapsed = time.monotonic() - started

    assert approved.status_code == 200, approved.content
    assert approved.json()["phase"] == Phase.APPROVED
    assert patched.status_code == 200, patched.content
    assert patched.json()["display_name"] == "Acme research"
    assert quota.status_code in (200, 201), quota.content
    assert elapsed < 30, f"three writes took {elapsed:.1f}s with the broker down"
    print(f"three writes with the broker down took {elapsed:.2f}s")
    # The writes and their audit events are kept; the work is recorded, not lost.
    assert AuditEvent.objects.count() >= events + 3
    assert Quota.objects.get(tenant__slug="acme", flavor__name="h100").nominal == 4
    kept = list(OutboxMessage.objects.values_list("task", "args"))
    assert ("tenants.reconcile_tenant", [tenant.pk]) in kept
    assert all(row.attempts >= 1 and row.last_error for row in OutboxMessage.objects.all())
    assert Tenant.objects.get(pk=tenant.pk).phase == Phase.APPROVED  # nothing ran

    # The broker comes back on the same address; a worker starts and relays what was kept.
    log = tmp_path / "worker.log"
    with redis_server(port, tmp_path / "redis"), celery_worker(gitops_repo, log, broker=broker) as queue:
        app.conf.task_default_queue = queue
        try:
            wait_until("the outbox was relayed", lambda: not OutboxMessage.objects.exists(), log, timeout=60)
            wait_until("the tenant is Ready at its latest generation",
                       lambda: Tenant.objects.filter(pk=tenant.pk, phase=Phase.READY,
                                                     observed_generation=Tenant.objects.get(pk=tenant.pk).generation
                                                     ).exists(), log, timeout=60)
        finally:
            app.conf.task_default_queue = "celery"
    ready = Tenant.objects.get(pk=tenant.pk)
    assert ready.display_name == "Acme research"
    assert any(p.name == "tenants" for p in (gitops_repo / "clusters/default").iterdir())
    assert "h100" in "".join(p.read_text() for p in (gitops_repo / "clusters/default/tenants" / "acme").rglob("*.yaml"))


def test_the_relay_keeps_messages_while_the_broker_is_down_and_sends_them_after(tmp_path: Path) -> None:
    """The relay itself: stops at the first failure, counts attempts, sends everything once the broker is up."""
    import redis

    from gpufleet.outbox import send
    port = free_port()
    broker = f"redis://127.0.0.1:{port}/0"
    tenant = factories.tenant("relay", "standard", phase=Phase.READY)
    with publishing_to(broker):
        for _ in range(3):
            send.enqueue("tenants.reconcile_tenant", tenant.pk)
        assert OutboxMessage.objects.count() == 3
        OutboxMessage.objects.update(created=OutboxMessage.objects.first().created.replace(year=2000))
        assert send.relay() == 0
        assert OutboxMessage.objects.count() == 3
        assert OutboxMessage.objects.order_by("pk").first().attempts == 2  # after-commit send + relay
        with redis_server(port, tmp_path / "redis"):
            assert send.relay() == 3
            assert redis.Redis(port=port).llen(app.conf.task_default_queue) == 3
    assert not OutboxMessage.objects.exists()


def test_an_unknown_task_in_the_outbox_does_not_hold_up_the_others() -> None:
    from gpufleet.outbox import send

    tenant = factories.tenant("fifo", "standard", phase=Phase.READY)
    with publishing_to("memory://"):
        OutboxMessage.objects.create(created=OutboxMessage._meta.get_field("created").to_python("2000-01-01T00:00Z"),
                                     task="tenants.renamed_long_ago", args=[1])
        OutboxMessage.objects.create(created=OutboxMessage._meta.get_field("created").to_python("2000-01-01T00:01Z"),
                                     task="tenants.reconcile_tenant", args=[tenant.pk])
        assert send.relay() == 1
    (stuck,) = OutboxMessage.objects.all()
    assert stuck.task == "tenants.renamed_long_ago" and stuck.attempts == 1 and "registered" in stuck.last_error
