"""The demo's billing: prices for the demo flavors and last month's usage, so invoices, the usage
chart and the exports have something to show without a TSDB. The usage is generated from a fixed
pattern (working hours on weekdays), stored through the same action a real collection uses, and
labelled as demo data in the collection log; nothing here is measured."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from gpufleet import clock
from gpufleet.core import conf
from scheduling.models import Flavor

from . import actions
from .models import Price, UsageRecord

PRICES = {"a100-whole": "2.40", "a100-3g": "1.10", "a100-hami-25": "0.70"}
# tenant: {flavor: units held during working hours}
PATTERN = {
    "vision": {"a100-whole": 4, "a100-3g": 2, "a100-hami-25": 6},
    "nlp-inference": {"a100-whole": 2, "a100-3g": 6},
    "contractors": {"a100-whole": 1},
}


def _last_month(now: datetime) -> tuple[datetime, datetime]:
    first_this = now.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    first_last = (first_this - timedelta(days=1)).replace(day=1)
    return first_last, first_this


def seed_billing(users: dict[str, Any], tenants: dict[str, Any]) -> None:
    start, end = _last_month(clock.now())
    currency = conf.BILLING_CURRENCY  # invoices are drafted in the platform's currency
    for flavor, amount in PRICES.items():
        if Flavor.objects.filter(name=flavor).exists() and not Price.objects.filter(flavor__name=flavor).exists():
            actions.set_price(flavor, amount, currency, start.date())
    if UsageRecord.objects.filter(hour__gte=start, hour__lt=end).exists():
        return
    weights = {f.name: f.weight for f in Flavor.objects.filter(name__in=PRICES)}
    actions.store_usage(start, end, _pattern(start, end, weights))
    actions.draft_all(f"{start:%Y-%m}", currency)
    # This month so far (settled hours only), so the overview's spend and forecast have figures.
    now_hour = clock.now().astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    if now_hour > end:
        actions.store_usage(end, now_hour, _pattern(end, now_hour, weights))


def _pattern(start: datetime, end: datetime, weights: dict[str, Decimal]) -> list[Any]:
    """Working hours on weekdays, the PATTERN's units held for the whole hour."""
    samples = []
    hour = start
    while hour < end:
        if hour.weekday() < 5 and 8 <= hour.hour < 18:
            for slug, held in PATTERN.items():
                for flavor, units in held.items():
                    unit_seconds = Decimal(units * 3600)
                    samples.append(actions.Sample(slug, flavor, hour, unit_seconds, unit_seconds * weights[flavor]))
        hour += timedelta(hours=1)
    return samples
