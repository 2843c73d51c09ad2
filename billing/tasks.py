"""Thin Celery entry points: hourly collection, monthly drafts. Idempotent (collecting replaces,
drafting rebuilds the same draft), acks_late."""

from __future__ import annotations

from datetime import timedelta

from celery import shared_task

from gpufleet import clock
from gpufleet.audit.context import acting
from infra.errors import TransientError

from . import actions, collect, opencost_source


@shared_task(name="billing.collect_recent", bind=True, acks_late=True, max_retries=5)
def collect_recent(self) -> int:  # type: ignore[no-untyped-def]
    with acting(task="billing.collect_recent", task_id=self.request.id or "", user_id=None, token_id=None):
        start, end = collect.recent_window()
        try:
            return collect.collect(start, end).records
        except TransientError as exc:
            raise self.retry(exc=exc, countdown=min(exc.delay * (2 ** self.request.retries), 600)) from exc


@shared_task(name="billing.draft_previous_month", acks_late=True)
def draft_previous_month() -> int:
    """On the 1st: draft every tenant's invoice for the month that just ended (finalizing is a human step)."""
    with acting(task="billing.draft_previous_month", user_id=None, token_id=None):
        first = clock.this_month()
        previous = (first - timedelta(days=1)).replace(day=1)
        return len(actions.draft_all(previous, opencost=opencost_source.invoice_figures(previous)))
