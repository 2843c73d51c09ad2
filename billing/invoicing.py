"""Pure invoice arithmetic: usage rows + prices in, invoice lines out. No I/O, no Django.

Rounding rule (documented in docs/billing.md): quantities and amounts are computed from the exact
measured seconds; each line's amount is quantized once, to the cent, with ROUND_HALF_EVEN
(banker's rounding: ties go to the even cent, so rounding errors do not drift one way over many
lines). The invoice total is the sum of the rounded line amounts, so it reproduces to the cent.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

CENT = Decimal("0.01")
QUANTITY_QUANTUM = Decimal("0.000001")
SECONDS_QUANTUM = Decimal("0.001")
HOUR = Decimal(3600)
ZERO = Decimal(0)


def money(value: Decimal) -> Decimal:
    return value.quantize(CENT, rounding=ROUND_HALF_EVEN)


def unit_hours(seconds: Decimal) -> Decimal:
    return (seconds / HOUR).quantize(QUANTITY_QUANTUM, rounding=ROUND_HALF_EVEN)


@dataclass(frozen=True)
class UsageRow:
    flavor_id: int
    flavor_name: str
    hour: datetime
    unit_seconds: Decimal
    gpu_equivalent_seconds: Decimal


@dataclass(frozen=True)
class PriceRow:
    id: int
    flavor_id: int
    per_unit_hour: Decimal
    effective_from: date
    effective_to: date | None

    def covers(self, day: date) -> bool:
        return self.effective_from <= day and (self.effective_to is None or day < self.effective_to)


@dataclass(frozen=True)
class BilledFlavor:
    """What a finalized invoice of an earlier period billed for one flavor, and what is measured now."""

    invoice_id: int
    invoice_number: str
    period: date
    flavor_id: int
    flavor_name: str
    billed_unit_seconds: Decimal
    measured_unit_seconds: Decimal
    measured_gpu_equivalent_seconds: Decimal
    billed_gpu_equivalent_seconds: Decimal
    unit_price: Decimal
    price_id: int | None


@dataclass
class Line:
    kind: str
    flavor_id: int | None
    flavor_name: str
    description: str
    charge_start: datetime
    charge_end: datetime
    quantity: Decimal
    unit_price: Decimal
    amount: Decimal
    unit_seconds: Decimal
    gpu_equivalent_seconds: Decimal
    price_id: int | None = None
    billed_unit_seconds: Decimal | None = None
    measured_unit_seconds: Decimal | None = None
    adjusts_id: int | None = None


@dataclass
class Draft:
    lines: list[Line] = field(default_factory=list)
    missing_prices: list[str] = field(default_factory=list)

    @property
    def subtotal(self) -> Decimal:
        return sum((line.amount for line in self.lines), ZERO).quantize(CENT)

    @property
    def total(self) -> Decimal:
        return self.subtotal


def month_bounds(period: date, tz: Any) -> tuple[datetime, datetime]:
    start = datetime(period.year, period.month, 1, tzinfo=tz)
    end = datetime(period.year + (period.month == 12), period.month % 12 + 1, 1, tzinfo=tz)
    return start, end


def usage_lines(rows: Iterable[UsageRow], prices: Sequence[PriceRow], period_start: datetime,
                period_end: datetime, currency: str) -> Draft:
    """One line per flavor and applicable price (two when a price changed within the month)."""
    draft = Draft()
    groups: dict[tuple[int, int], list[UsageRow]] = defaultdict(list)
    names: dict[int, str] = {}
    for row in rows:
        names[row.flavor_id] = row.flavor_name
        price = next((p for p in prices if p.flavor_id == row.flavor_id and p.covers(row.hour.date())), None)
        if price is None:
            if row.unit_seconds > 0:
                draft.missing_prices.append(f"{row.flavor_name} on {row.hour.date().isoformat()}")
            continue
        groups[(row.flavor_id, price.id)].append(row)
    by_id = {p.id: p for p in prices}
    for (flavor_id, price_id), members in sorted(groups.items(), key=lambda kv: (names[kv[0][0]], kv[0][1])):
        price = by_id[price_id]
        seconds = sum((r.unit_seconds for r in members), ZERO)
        gpu_seconds = sum((r.gpu_equivalent_seconds for r in members), ZERO)
        if seconds == 0:
            continue
        start = max(period_start, _day_start(price.effective_from, period_start.tzinfo))
        end = min(period_end, _day_start(price.effective_to, period_start.tzinfo)) if price.effective_to else period_end
        draft.lines.append(Line(
            kind="usage", flavor_id=flavor_id, flavor_name=names[flavor_id],
            description=f"{names[flavor_id]}: {unit_hours(seconds)} unit-hours at {price.per_unit_hour} "
                        f"{currency}/unit-hour",
            charge_start=start, charge_end=end,
            quantity=unit_hours(seconds), unit_price=price.per_unit_hour,
            amount=money(seconds * price.per_unit_hour / HOUR),
            unit_seconds=seconds, gpu_equivalent_seconds=gpu_seconds, price_id=price.id,
        ))
    return draft


def _day_start(day: date, tz: Any) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=tz)


def adjustment_lines(billed: Iterable[BilledFlavor], currency: str, tz: Any) -> list[Line]:
    """Usage re-measured after its period was finalized: bill (or credit) the difference at the
    price the original invoice used, on the next invoice."""
    lines = []
    for item in sorted(billed, key=lambda b: (b.period, b.flavor_name)):
        delta = item.measured_unit_seconds - item.billed_unit_seconds
        if delta == 0:
            continue
        start, end = month_bounds(item.period, tz)
        lines.append(Line(
            kind="adjustment", flavor_id=item.flavor_id, flavor_name=item.flavor_name,
            description=f"Adjustment to {item.invoice_number} ({item.period:%Y-%m}) {item.flavor_name}: "
                        f"billed {item.billed_unit_seconds} s, measured {item.measured_unit_seconds} s",
            charge_start=start, charge_end=end, quantity=unit_hours(delta), unit_price=item.unit_price,
            amount=money(delta * item.unit_price / HOUR), unit_seconds=delta,
            gpu_equivalent_seconds=item.measured_gpu_equivalent_seconds - item.billed_gpu_equivalent_seconds,
            price_id=item.price_id, billed_unit_seconds=item.billed_unit_seconds,
            measured_unit_seconds=item.measured_unit_seconds, adjusts_id=item.invoice_id,
        ))
    return lines


def idle_line(lines: Sequence[Line], tenant_gpu_seconds: Decimal, fleet_gpu_seconds: Decimal,
              fleet_capacity_gpu_seconds: Decimal, period_start: datetime, period_end: datetime,
              currency: str) -> Line | None:
    """The tenant's share of the fleet's idle GPU-hours, in proportion to its use, priced at the
    tenant's own average price per GPU-equivalent hour on this invoice."""
    idle = fleet_capacity_gpu_seconds - fleet_gpu_seconds
    usage = [line for line in lines if line.kind == "usage"]
    usage_gpu_seconds = sum((line.gpu_equivalent_seconds for line in usage), ZERO)
    if idle <= 0 or fleet_gpu_seconds <= 0 or tenant_gpu_seconds <= 0 or usage_gpu_seconds <= 0:
        return None
    share = (idle * tenant_gpu_seconds / fleet_gpu_seconds).quantize(SECONDS_QUANTUM, rounding=ROUND_HALF_EVEN)
    per_gpu_hour = (sum((line.amount for line in usage), ZERO) * HOUR / usage_gpu_seconds).quantize(
        Decimal("0.000001"), rounding=ROUND_HALF_EVEN)
    return Line(
        kind="idle", flavor_id=None, flavor_name="", charge_start=period_start, charge_end=period_end,
        description=f"Share of fleet idle GPU-hours ({unit_hours(share)} GPU-hours at {per_gpu_hour} "
                    f"{currency}/GPU-hour)",
        quantity=unit_hours(share), unit_price=per_gpu_hour, amount=money(share * per_gpu_hour / HOUR),
        unit_seconds=share, gpu_equivalent_seconds=share,
    )


def content_hash(header: dict[str, Any], lines: Sequence[dict[str, Any]]) -> str:
    """SHA-256 over a canonical JSON of the invoice: any change to a finalized invoice shows."""
    body = json.dumps({"invoice": header, "lines": list(lines)}, sort_keys=True, default=str,
                      separators=(",", ":"))
    return hashlib.sha256(body.encode()).hexdigest()
