"""Thin Celery entry points. They take ids, re-read everything, and are safe to run twice."""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings

from gpufleet.audit.context import acting
from infra.errors import TransientError

from . import reconcile

log = logging.getLogger(__name__)


@shared_task(name="tenants.reconcile_tenant", bind=True, acks_late=True, max_retries=8)
def reconcile_tenant(self, tenant_id: int) -> str:  # type: ignore[no-untyped-def]
    with acting(task="tenants.reconcile_tenant", task_id=self.request.id or "", user_id=None, token_id=None):
        try:
            return reconcile.reconcile_tenant(tenant_id).summary
        except TransientError as exc:
            # Exponential backoff from the adapter's hint; the periodic reconcile_all is the backstop.
            # Capped below the broker's visibility timeout: Redis would re-deliver a message held longer
            # (a duplicate per timeout); longer outages are the periodic reconcile_all's job.
            cap = max(1, settings.GPUFLEET_VISIBILITY_TIMEOUT_SECONDS // 2)
            countdown = min(exc.delay * (2 ** self.request.retries), cap)
            raise self.retry(exc=exc, countdown=countdown) from exc


@shared_task(name="tenants.reconcile_all", acks_late=True)
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
