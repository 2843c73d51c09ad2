"""Thin Celery entry points. They take ids, re-read everything, and are safe to run twice."""

from __future__ import annotations

import logging

from celery import shared_task

from gpufleet.audit.context import acting
from infra.errors import TransientError

from . import reconcile
from .models import Tenant

log = logging.getLogger(__name__)


@shared_task(name="tenants.reconcile_tenant", bind=True, acks_late=True, max_retries=8)
def reconcile_tenant(self, tenant_id: int) -> str:  # type: ignore[no-untyped-def]
    with acting(task="tenants.reconcile_tenant", task_id=self.request.id or "", user_id=None, token_id=None):
        try:
            return reconcile.reconcile_tenant(tenant_id).summary
        except TransientError as exc:
            # Exponential backoff from the adapter's hint; the periodic reconcile_all is the backstop.
            countdown = min(exc.delay * (2 ** self.request.retries), 600)
            raise self.retry(exc=exc, countdown=countdown) from exc


@shared_task(name="tenants.reconcile_all", acks_late=True)
def reconcile_all() -> int:
    """Repair whatever a lost message or a manual edit left behind: enqueue every live tenant."""
    with acting(task="tenants.reconcile_all", user_id=None, token_id=None):
        try:
            reconcile.reconcile_platform()
        except Exception:  # the platform failing must not stop tenants from being repaired
            log.exception("platform reconcile failed")
        ids = list(Tenant.objects.live().values_list("pk", flat=True))
        for tenant_id in ids:
            reconcile_tenant.delay(tenant_id)
        return len(ids)
