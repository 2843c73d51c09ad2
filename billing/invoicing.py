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
from collections.abc import Iterable, Mapping, Sequence
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
class Place:
    """Where usage ran, as an invoice line snapshots it (FOCUS RegionId, RegionName, AvailabilityZone)."""

    cluster_id: int | None = None
    cluster_name: str = ""
    region: str = ""
    region_name: str = ""
    availability_zone: str = ""  # only when the cluster has exactly one zone: usage is not tracked per zone


NOWHERE = Place()


@dataclass(frozen=True)
class UsageRow:
    flavor_id: int
    flavor_name: str
    hour: datetime
    unit_seconds: Decimal
    gpu_equivalent_seconds: Decimal
    cluster_id: int | None = None


@dataclass(frozen=True)
class PriceRow:
    id: int
    flavor_id: int
    per_unit_hour: Decimal
    effective_from: date
    effective_to: date | None
    cluster_id: int | None = None  # None: every cluster

    def covers(self, day: date) -> bool:
        return self.effective_from <= day and (self.effective_to is None or day < self.effective_to)


class PriceBook:
    """Prices by flavor and cluster: a price for the usage's own cluster wins over the every-cluster one."""

    def __init__(self, prices: Iterable[PriceRow]) -> None:
        self.by_id: dict[int, PriceRow] = {}
        self._by_key: dict[tuple[int, int | None], list[PriceRow]] = defaultdict(list)
        for price in prices:
            self.by_id[price.id] = price
            self._by_key[(price.flavor_id, price.cluster_id)].append(price)

    def change_days(self, after: date, before: date) -> list[date]:
        """The days strictly between `after` and `before` on which some price starts or ends. Between two
        consecutive such days `find` gives every (flavor, cluster) the same answer on every day."""
        days = {price.effective_from for price in self.by_id.values()}
        days |= {price.effective_to for price in self.by_id.values() if price.effective_to is not None}
        return sorted(day for day in days if after < day < before)

    def find(self, flavor_id: int, cluster_id: int | None, day: date) -> PriceRow | None:
        if cluster_id is not None:
            for price in self._by_key.get((flavor_id, cluster_id), ()):
                if price.covers(day):
                    return price
        for price in self._by_key.get((flavor_id, None), ()):
            if price.covers(day):
                return price
        return None


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
    place: Place = NOWHERE  # the cluster the usage ran on


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
    place: Place = NOWHERE


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

    def invoice_totals(self) -> dict[str, Decimal]:
        """The Invoice fields this draft computes, by field name: drafting sets each on the invoice, so a new
        total is added here (and on the model and serializer) only."""
        return {"subtotal": self.subtotal, "total": self.total}


def month_bounds(period: date, tz: Any) -> tuple[datetime, datetime]:
    start = datetime(period.year, period.month, 1, tzinfo=tz)
    end = datetime(period.year + (period.month == 12), period.month % 12 + 1, 1, tzinfo=tz)
    return start, end


def usage_lines(rows: Iterable[UsageRow], prices: Sequence[PriceRow] | PriceBook, period_start: datetime,
                period_end: datetime, currency: str, places: Mapping[int, Place] | None = None) -> Draft:
    """One line per flavor, cluster and applicable price (two when a price changed within the month).
    Descriptions name the cluster when the usage ran on more than one."""
    draft = Draft()
    book = prices if isinstance(prices, PriceBook) else PriceBook(prices)
    groups: dict[tuple[int, int | None, int], list[UsageRow]] = defaultdict(list)
    names: dict[int, str] = {}
    for row in rows:
        names[row.flavor_id] = row.flavor_name
        price = book.find(row.flavor_id, row.cluster_id, row.hour.date())
        if price is None:
            if row.unit_seconds > 0:
                draft.missing_prices.append(f"{row.flavor_name} on {row.hour.date().isoformat()}")
            continue
        groups[(row.flavor_id, row.cluster_id, price.id)].append(row)
    places = places or {}
    several = len({cluster for _, cluster, _ in groups}) > 1

    def place_of(cluster_id: int | None) -> Place:
        return places.get(cluster_id, NOWHERE) if cluster_id is not None else NOWHERE  # type: ignore[arg-type]

    for (flavor_id, cluster_id, price_id), members in sorted(
            groups.items(), key=lambda kv: (names[kv[0][0]], place_of(kv[0][1]).cluster_name, kv[0][1] or 0, kv[0][2])):
        price = book.by_id[price_id]
        seconds = sum((r.unit_seconds for r in members), ZERO)
        gpu_seconds = sum((r.gpu_equivalent_seconds for r in members), ZERO)
        if seconds == 0:
            continue
        place = place_of(cluster_id)
        where = f" on {place.cluster_name}" if several and place.cluster_name else ""
        start = max(period_start, _day_start(price.effective_from, period_start.tzinfo))
        end = min(period_end, _day_start(price.effective_to, period_start.tzinfo)) if price.effective_to else period_end
        draft.lines.append(Line(
            kind="usage", flavor_id=flavor_id, flavor_name=names[flavor_id],
            description=f"{names[flavor_id]}{where}: {unit_hours(seconds)} unit-hours at {price.per_unit_hour} "
                        f"{currency}/unit-hour",
            charge_start=start, charge_end=end,
            quantity=unit_hours(seconds), unit_price=price.per_unit_hour,
            amount=money(seconds * price.per_unit_hour / HOUR),
            unit_seconds=seconds, gpu_equivalent_seconds=gpu_seconds, price_id=price.id, place=place,
        ))
    return draft


def _day_start(day: date, tz: Any) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=tz)


def adjustment_lines(billed: Iterable[BilledFlavor], currency: str, tz: Any) -> list[Line]:
    """Usage re-measured after its period was finalized: bill (or credit) the difference at the
    price the original invoice used, on the next invoice."""
    lines = []
    billed = list(billed)
    several = len({item.place.cluster_id for item in billed}) > 1
    for item in sorted(billed, key=lambda b: (b.period, b.flavor_name, b.place.cluster_name)):
        delta = item.measured_unit_seconds - item.billed_unit_seconds
        if delta == 0:
            continue
        start, end = month_bounds(item.period, tz)
        where = f" on {item.place.cluster_name}" if several and item.place.cluster_name else ""
        lines.append(Line(
            kind="adjustment", flavor_id=item.flavor_id, flavor_name=item.flavor_name, place=item.place,
            description=f"Adjustment to {item.invoice_number} ({item.period:%Y-%m}) {item.flavor_name}{where}: "
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
