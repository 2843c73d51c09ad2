"""How Celery tasks retry a fault that passes: the database restarting or failing over, a volume made
writable again, an API server answering again (issue 27: these waited for the 300 s periodic pass).

Backoff doubles from the first delay and is capped at RETRY_CAP_SECONDS, so a task tries again at most that
long after the fault has ended (the target is converged <= 30 s after it). The cap also stays below the
broker's visibility timeout: Redis re-delivers a message held longer. MAX_RETRIES at the cap spans the
periodic reconcile_all's default period (300 s): after that, the periodic pass is the backstop.
"""

from __future__ import annotations

from typing import Any

from django.db import InterfaceError, OperationalError

from gpufleet.core import conf

# psycopg's "connection refused", "server closed the connection unexpectedly", "terminating connection due
# to administrator command" (OperationalError) and "connection already closed" (InterfaceError), as Django
# wraps them. Never IntegrityError or DataError: those are bugs or bad input, retrying will not help.
DATABASE_ERRORS: tuple[type[Exception], ...] = (OperationalError, InterfaceError)
FIRST_DELAY_SECONDS = 2.0
MAX_RETRIES = 24


def cap_seconds() -> float:
    return float(max(1, min(15, conf.VISIBILITY_TIMEOUT_SECONDS // 2)))


def countdown(first: float, retries: int) -> float:
    """The delay before retry number `retries` + 1: `first` doubled per earlier retry, capped."""
    return min(first * (2 ** min(retries, 16)), cap_seconds())


def retry(task: Any, exc: Exception, first: float = FIRST_DELAY_SECONDS) -> Exception:
    """The Retry to raise from a bound task (`raise retry(self, exc)`)."""
    return task.retry(exc=exc, countdown=countdown(first, task.request.retries), max_retries=MAX_RETRIES)


# For tasks that have no other retry logic: Celery's own autoretry with the same backoff.
ON_DATABASE_ERRORS: dict[str, Any] = {
    "autoretry_for": DATABASE_ERRORS, "retry_backoff": FIRST_DELAY_SECONDS, "retry_backoff_max": 15,
    "retry_jitter": False, "max_retries": MAX_RETRIES,
}
