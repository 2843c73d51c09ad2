"""The one place product code asks for "now" (DESIGN §6: time is injected).

Every date rule of the platform — "this period has not ended", "this price starts today", "this token
has expired", "collect the last settled hours" — reads the clock through `now()` / `today()`, never
`datetime.now()` or `date.today()` directly. Tests pin it (``tests.support.clock.pinned``, built on
`time-machine`, which also moves ``django.utils.timezone.now`` and ``auto_now`` fields), so no test
depends on the day the suite runs.
"""

from __future__ import annotations

from datetime import UTC, date, datetime


def now() -> datetime:
    """The current instant, UTC-aware."""
    return datetime.now(UTC)


def today() -> date:
    """Today's date in UTC: billing periods, price effective dates and invoice years are UTC dates."""
    return now().date()


def this_month() -> date:
    """The first day of the current UTC month: the billing period that has not ended yet."""
    return today().replace(day=1)
