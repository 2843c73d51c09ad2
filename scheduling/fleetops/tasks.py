"""Thin Celery entry points of fleet operations."""

from __future__ import annotations

from celery import shared_task

from infra import http

from .models import FleetSettings, IdleNotice


@shared_task(name="scheduling.fleetops.tasks.send_idle_webhook", acks_late=True)
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
