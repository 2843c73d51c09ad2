"""Figures over time for the portal's charts, from stored usage (the database, never the TSDB: a chart
shows even when the metrics source is down, and agrees with the invoices).

- `daily_units`: per flavor and day, the average units held over the day's measured hours ("in use", as
  scheduling/figures.py defines it, averaged per day); a day without measured hours is a gap, not a zero.
- `daily_spend`: the month's cumulative spend per day at the prices in force, and the forecast line to the
  month's end (billing.month_to_date's figure).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import Count, Sum
from django.db.models.functions import TruncDate

from . import invoicing
from .actions import _billing_currency, _price_rows
from .month_to_date import MonthToDate
from .periods import period_bounds

DAY_SECONDS = Decimal(86400)
HOUR = Decimal(3600)
UNITS = Decimal("0.01")


def days_between(start: date, end: date) -> list[date]:
    return [start + timedelta(days=i) for i in range((end - start).days)]


def daily_units(records: Any, start: date, end: date) -> tuple[list[date], dict[str, list[Decimal | None]]]:
    """Days in [start, end) and, per flavor, the average units held over each day's measured hours."""
    days = days_between(start, end)
    window = records.filter(hour__gte=datetime.combine(start, datetime.min.time(), tzinfo=UTC),
                            hour__lt=datetime.combine(end, datetime.min.time(), tzinfo=UTC))
    dated = window.annotate(day=TruncDate("hour", tzinfo=UTC))
    hours = dict(dated.values_list("day").annotate(n=Count("hour", distinct=True)).order_by())
    series: dict[str, list[Decimal | None]] = {}
    for row in dated.values("day", "flavor__name").annotate(u=Sum("unit_seconds")).order_by("flavor__name"):
        values = series.setdefault(row["flavor__name"], [None] * len(days))
        values[days.index(row["day"])] = (row["u"] / (HOUR * hours[row["day"]])).quantize(UNITS)
    for values in series.values():  # a measured day without this flavor held none of it
        for i, day in enumerate(days):
            if values[i] is None and day in hours:
                values[i] = Decimal(0)
    return days, series


def daily_spend(records: Any, period: date, month: MonthToDate,
                currency: str | None = None) -> tuple[list[date], list[Decimal | None], list[Decimal | None]]:
    """Days of the month, the cumulative spend up to each measured day, and the forecast line (from the
    last measured day to the month's end, ending at `month.forecast`)."""
    start, end = period_bounds(period)
    days = days_between(start.date(), end.date())
    prices = invoicing.PriceBook(_price_rows(_billing_currency(currency)))
    per_day: dict[date, Decimal] = defaultdict(Decimal)
    rows = (records.filter(hour__gte=start, hour__lt=end).annotate(day=TruncDate("hour", tzinfo=UTC))
            .values("day", "flavor_id", "cluster_id").annotate(u=Sum("unit_seconds")).order_by())
    for row in rows:
        price = prices.find(row["flavor_id"], row["cluster_id"], row["day"])
        if price is not None:
            per_day[row["day"]] += row["u"] / HOUR * price.per_unit_hour
    last = max(per_day, default=None)
    spent: list[Decimal | None] = []
    total = Decimal(0)
    for day in days:
        total += per_day.get(day, Decimal(0))
        spent.append(total.quantize(Decimal("0.01")) if last is not None and day <= last else None)
    forecast: list[Decimal | None] = [None] * len(days)
    if last is not None and month.measured_until is not None:
        at = days.index(last)
        begin, finish = spent[at] or Decimal(0), month.forecast
        steps = len(days) - 1 - at
        for i in range(at, len(days)):
            share = Decimal(i - at) / steps if steps else Decimal(1)
            forecast[i] = (begin + (finish - begin) * share).quantize(Decimal("0.01"))
    return days, spent, forecast
