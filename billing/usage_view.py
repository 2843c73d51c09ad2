"""Usage by day and flavor for one tenant and month (read model shared by the API and the pages)."""

from __future__ import annotations

from collections import defaultdict
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

from django.db.models.functions import TruncDay

from .periods import period_bounds
from .sums import ExactSum


def daily_usage(records: Any, tenant_id: int, period: date) -> dict[str, Any]:
    """{"days": [...], "flavors": [...], "rows": [{day, flavor, unit_seconds, gpu_equivalent_seconds}]}
    `records` is an already scoped UsageRecord queryset."""
    start, end = period_bounds(period)
    rows = (records.filter(tenant_id=tenant_id, hour__gte=start, hour__lt=end)
            .annotate(day=TruncDay("hour")).values("day", "flavor__name")
            .annotate(u=ExactSum("unit_seconds"), g=ExactSum("gpu_equivalent_seconds")).order_by("day", "flavor__name"))
    days = [(start + timedelta(days=i)).date() for i in range((end - start).days)]
    out = [{"day": r["day"].date().isoformat(), "flavor": r["flavor__name"], "unit_seconds": r["u"],
            "gpu_equivalent_seconds": r["g"]} for r in rows]
    return {"days": [d.isoformat() for d in days], "flavors": sorted({r["flavor"] for r in out}), "rows": out}


def gpu_hours_matrix(data: dict[str, Any]) -> dict[str, list[Decimal]]:
    """flavor -> GPU-equivalent hours per day, for the chart."""
    index = {day: i for i, day in enumerate(data["days"])}
    matrix: dict[str, list[Decimal]] = defaultdict(lambda: [Decimal(0)] * len(data["days"]))
    for row in data["rows"]:
        matrix[row["flavor"]][index[row["day"]]] += row["gpu_equivalent_seconds"] / 3600
    return {flavor: matrix[flavor] for flavor in data["flavors"]}


