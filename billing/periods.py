"""Billing months and currencies: parsing and bounds (UTC), with errors that name the field."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from typing import Any

from gpufleet.core import conf
from gpufleet.core.errors import ActionError

PERIOD = re.compile(r"(?P<year>[0-9]{4})-(?P<month>0[1-9]|1[0-2])")
# Billing months the platform can represent: year 0 does not exist and 9999-12 has no next month to
# end at (both were 500s). Nobody bills outside this range.
FIRST_YEAR, LAST_YEAR = 2000, 2999
CURRENCY = re.compile(r"^[A-Z]{3}$")


def parse_period(value: Any) -> date:
    """'2026-03' (or a date) -> date(2026, 3, 1)."""
    if isinstance(value, date):
        return value.replace(day=1)
    match = PERIOD.fullmatch(value) if isinstance(value, str) else None
    if not match:
        raise ActionError({"period": [f"must be a month like 2026-03 (got {value!r})"]})
    if not FIRST_YEAR <= int(match["year"]) <= LAST_YEAR:
        raise ActionError({"period": [f"must be a month between {FIRST_YEAR}-01 and {LAST_YEAR}-12 (got {value!r})"]})
    return date(int(match["year"]), int(match["month"]), 1)


def period_bounds(period: date) -> tuple[datetime, datetime]:
    """[first instant of the month, first instant of the next month) in UTC."""
    start = datetime(period.year, period.month, 1, tzinfo=UTC)
    end = datetime(period.year + (period.month == 12), period.month % 12 + 1, 1, tzinfo=UTC)
    return start, end


def check_currency(code: Any) -> str | None:
    """None when `code` is a currency we bill in, else the reason."""
    allowed = list(conf.CURRENCIES)
    if not isinstance(code, str) or not CURRENCY.match(code):
        return f"must be an ISO 4217 code like USD (got {code!r})"
    if code not in allowed:
        return f"unknown currency {code!r}; billing supports {', '.join(allowed)}"
    return None
