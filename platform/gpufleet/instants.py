"""The one parser for an instant a person or client types: `?start=`, `?end=`, `?at=` (API and portal).

Each caller used `datetime.fromisoformat` or Django's `parse_datetime` on its own: `2026-13-01T00:00:00Z`
raised from inside `parse_datetime` (500), `9999-12-31T23:00:00Z` overflowed the first `+ timedelta` (500),
and `fromisoformat` also took week dates and compact forms the OpenAPI document (`format: date-time`) does not
offer. Here: RFC 3339 date-time only (a missing offset is read as UTC, as before), a real calendar date and
time, and a year near the clock's "now", so every later computation on it stays in range.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from gpufleet import clock

# RFC 3339 §5.6 date-time; the offset may be left out (then UTC), as the API and portal have always allowed.
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?([Zz]|[+-]\d{2}:\d{2})?", re.ASCII)
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
YEARS_AHEAD = 5
EXAMPLE = "2026-11-01T00:00:00Z"


class InstantError(ValueError):
    """`reason` says what is wrong with the text, ready to stand after the field's name."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def latest() -> datetime:
    now = clock.now()
    return now.replace(year=now.year + YEARS_AHEAD, month=1, day=1, hour=0, minute=0, second=0, microsecond=0)


def parse_instant(raw: str) -> datetime:
    """`raw` as a UTC-aware datetime, or InstantError (never another exception, whatever the text)."""
    shown = raw if len(raw) <= 40 else raw[:40] + "…"
    if not _RFC3339.fullmatch(raw):
        raise InstantError(f"not an ISO 8601 time like {EXAMPLE}: {shown!r}")
    try:
        moment = datetime.fromisoformat(raw[:-1] + "+00:00" if raw[-1] in "Zz" else raw)
    except ValueError as exc:  # a month 13, a 30 February, an hour 25
        raise InstantError(f"not a calendar time ({exc}): {shown!r}") from exc
    moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment
    try:
        moment = moment.astimezone(UTC)
    except OverflowError as exc:  # 9999-12-31T23:00:00-05:00 is past year 9999 in UTC
        raise InstantError(f"out of range: {shown!r}") from exc
    end = latest()
    if not EARLIEST <= moment < end:
        raise InstantError(f"must be from {EARLIEST:%Y-%m-%d} to before {end:%Y-%m-%d}: {shown!r}")
    return moment
