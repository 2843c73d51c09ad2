"""Thin Celery entry points of fleet operations."""

from __future__ import annotations

from celery import shared_task

from gpufleet import clock, task_retry
from infra import http

from . import service
from .models import FleetSettings, IdleNotice


@shared_task(name="scheduling.fleetops.tasks.send_idle_webhook", acks_late=True, **task_retry.ON_DATABASE_ERRORS)
def send_idle_webhook(notice_id: int) -> bool:
    """POST one idle notice to the admin-configured webhook (idempotent for the receiver: it carries the id)."""
    notice = IdleNotice.objects.filter(pk=notice_id).select_related("tenant").first()
    url = FleetSettings.current().webhook_url
    if notice is None or not url:
        return False
    session = http.session(http.Timeouts(connect=3.05, read=10.0))
    response = session.post(url, json={"id": notice.pk, "tenant": notice.tenant.slug, "message": notice.message,
                                       "finding": notice.finding}, timeout=(3.05, 10.0))
    response.raise_for_status()
    return True


@shared_task(name="scheduling.fleetops.tasks.rollup_recent", acks_late=True)
def rollup_recent() -> dict[str, int]:
    """Roll up the recently settled hours (idle slots, utilisation) into the TSDB. Idempotent: hours with a
    final roll-up are skipped, others are (re)computed under a newer rev; two runs at once are harmless."""
    return service.rollup_recent(clock.now())
