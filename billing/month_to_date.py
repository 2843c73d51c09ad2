"""This month's spend so far and the month it is on track for (the overview pages' money figures).

Priced exactly as an invoice would price it (invoicing.usage_lines over the same usage and price rows), so
the overview and the invoice drafted after month end agree. The forecast extrapolates the spend linearly
from the measured part of the month (up to the end of the newest measured hour) to the whole month: a
figure to plan with, labelled as such, never billed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import Max, Q

from gpufleet import clock

from . import invoicing
from .actions import _billing_currency, _price_rows, _usage_rows
from .models import UsageRecord
from .periods import period_bounds
from .sums import ExactSum

ZERO = Decimal(0)


@dataclass(frozen=True)
class MonthToDate:
    period: date
    currency: str
    spent: Decimal
    forecast: Decimal
    # End of the newest measured hour (None: nothing measured this month).
    measured_until: datetime | None
    missing_prices: list[str] = field(default_factory=list)

    @property
    def measured_share(self) -> Decimal:
        """How much of the month the figure covers, 0..1."""
        start, end = period_bounds(self.period)
        if self.measured_until is None:
            return ZERO
        return Decimal((self.measured_until - start).total_seconds()) / Decimal((end - start).total_seconds())


def forecast(spent: Decimal, start: datetime, end: datetime, measured_until: datetime | None) -> Decimal:
    """Pure: the spend extrapolated from [start, measured_until) to [start, end)."""
    if measured_until is None or measured_until <= start:
        return ZERO
    covered = Decimal((min(measured_until, end) - start).total_seconds())
    whole = Decimal((end - start).total_seconds())
    return invoicing.money(spent * whole / covered)


def month_to_date(tenant_ids: list[int], now: datetime | None = None, currency: str | None = None) -> MonthToDate:
    """Spend of the given tenants together in the current month (UTC) up to the newest measured hour."""
    return _month_to_date(tenant_ids, now, currency, each=False)[0]


def month_to_date_each(tenant_ids: list[int], now: datetime | None = None,
                       currency: str | None = None) -> dict[int, MonthToDate]:
    """The same figure for each tenant on its own, in the same three queries however many tenants."""
    return _month_to_date(tenant_ids, now, currency, each=True)


def _month_to_date(tenant_ids: list[int], now: datetime | None, currency: str | None,
                   *, each: bool) -> dict[int, MonthToDate]:
    now = now or clock.now()
    period = now.astimezone(UTC).date().replace(day=1)
    start, end = period_bounds(period)
    currency = _billing_currency(currency)
    newest_of = dict(UsageRecord.objects.filter(tenant_id__in=tenant_ids, hour__gte=start, hour__lt=end)
                     .values_list("tenant_id").annotate(newest=Max("hour")).order_by())
    prices = invoicing.PriceBook(_price_rows(currency))
    spent: dict[int, Decimal] = {}
    missing: dict[int, list[str]] = {}
    for tenant_id, rows in _usage_rows(tenant_ids, start, end, prices).items():
        draft = invoicing.usage_lines(rows, prices, start, end, currency)
        spent[tenant_id] = draft.total
        missing[tenant_id] = list(draft.missing_prices)

    def figure(ids: list[int]) -> MonthToDate:
        newest = max((newest_of[i] for i in ids if i in newest_of), default=None)
        measured_until = newest + timedelta(hours=1) if newest else None
        total = sum((spent.get(i, ZERO) for i in ids), ZERO)
        gaps = sorted({m for i in ids for m in missing.get(i, [])})
        return MonthToDate(period, currency, total, forecast(total, start, end, measured_until), measured_until, gaps)

    if each:
        return {tenant_id: figure([tenant_id]) for tenant_id in tenant_ids}
    return {0: figure(list(tenant_ids))}


@dataclass(frozen=True)
class Allocation:
    """Units of each flavor held during the newest measured hour (unit-seconds / 3600), by flavor name."""

    hour: datetime | None
    units: dict[str, Decimal]


def allocations_now(records: Any) -> dict[int, Allocation]:
    """Like allocation_now, for each tenant of `records` on its own (its own newest hour). Two queries."""
    newest_of = dict(records.values_list("tenant_id").annotate(newest=Max("hour")).order_by())
    if not newest_of:
        return {}
    which = Q()
    for tenant_id, newest in newest_of.items():
        which |= Q(tenant_id=tenant_id, hour=newest)
    units: dict[int, dict[str, Decimal]] = {tenant_id: {} for tenant_id in newest_of}
    for r in (records.filter(which).values("tenant_id", "flavor__name")
              .annotate(u=ExactSum("unit_seconds")).order_by("tenant_id", "flavor__name")):
        units[r["tenant_id"]][r["flavor__name"]] = (r["u"] / invoicing.HOUR).quantize(Decimal("0.01"))
    return {tenant_id: Allocation(newest, units[tenant_id]) for tenant_id, newest in newest_of.items()}


def allocation_now(records: Any) -> Allocation:
    """From `records` (a UsageRecord queryset, already scoped or filtered to a tenant): the newest hour
    that has rows, and the average units of each flavor held in it. Two queries."""
    newest = records.aggregate(newest=Max("hour"))["newest"]
    if newest is None:
        return Allocation(None, {})
    rows = (records.filter(hour=newest).values("flavor__name")
            .annotate(u=ExactSum("unit_seconds")).order_by("flavor__name"))
    return Allocation(newest, {r["flavor__name"]: (r["u"] / invoicing.HOUR).quantize(Decimal("0.01"))
                               for r in rows})
