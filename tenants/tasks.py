"""Thin Celery entry points. They take ids, re-read everything, and are safe to run twice."""

from __future__ import annotations

import logging

from celery import shared_task

from gpufleet import task_retry
from gpufleet.audit.context import acting
from infra.errors import InfraError, TransientError

from . import reconcile

log = logging.getLogger(__name__)


@shared_task(name="tenants.reconcile_tenant", bind=True, acks_late=True, max_retries=task_retry.MAX_RETRIES)
def reconcile_tenant(self, tenant_id: int) -> str:  # type: ignore[no-untyped-def]
    """Retried with backoff (gpufleet.task_retry) on a transient adapter error, on a database that went away
    (a restart, a failover) and on a failure of the environment that is fixed outside gpufleet (an unwritable
    repository): each converges within seconds of the fault ending. The periodic reconcile_all remains the
    backstop for faults longer than the retries."""
    with acting(task="tenants.reconcile_tenant", task_id=self.request.id or "", user_id=None, token_id=None):
        try:
            outcome = reconcile.reconcile_tenant(tenant_id)
        except TransientError as exc:
            raise task_retry.retry(self, exc, exc.delay) from exc
        except task_retry.DATABASE_ERRORS as exc:
            log.warning("reconcile of tenant %s: the database failed (%s); retrying", tenant_id, exc)
            raise task_retry.retry(self, exc) from exc
        except InfraError as exc:
            if exc.retry_after is None:
                raise
            raise task_retry.retry(self, exc, exc.retry_after) from exc
        if outcome.retry_after is not None:
            raise task_retry.retry(self, TransientError("; ".join(outcome.problems)), outcome.retry_after)
        return outcome.summary


@shared_task(name="tenants.reconcile_all", acks_late=True, **task_retry.ON_DATABASE_ERRORS)
def reconcile_all() -> int:
    """Repair whatever a lost message or a manual edit left behind, for every live tenant.

    One pass (tenants.fleet): tenants whose objects are already right cost a render and a byte
    comparison; the others are reconciled here, their commits batched. Transient failures go to
    the per-tenant task, which retries with backoff.
    """
    from .fleet import reconcile_fleet

    with acting(task="tenants.reconcile_all", user_id=None, token_id=None):
        result = reconcile_fleet(message="reconcile all tenants")
        for problem in result.errors:
            log.warning("reconcile_all: %s", problem)
        for tenant_id in result.retry + result.deferred:
            reconcile_tenant.delay(tenant_id)
        return result.tenants
