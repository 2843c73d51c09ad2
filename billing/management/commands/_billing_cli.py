"""Shared bits of the billing CLI: time parsing, exact JSON numbers, usage totals."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from django.core.management.base import CommandError

from billing.models import UsageRecord
from billing.sums import ExactSum
from gpufleet.core.errors import ActionError


def parse_time(value: str, name: str) -> datetime:
    """ISO 8601; a trailing Z and a bare date are accepted; a time without zone is taken as UTC."""
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise CommandError(f"--{name}: not an ISO 8601 time: {value!r}") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def number(value: Decimal) -> int | float:
    """Decimal -> JSON number: integral values exactly as integers; fractions (at most 3 decimals of
    seconds, far below 2**53) print back to the same digits."""
    return int(value) if value == value.to_integral_value() else float(value)


def dumps(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=True, default=lambda v: number(v) if isinstance(v, Decimal) else str(v))


def usage_by_flavor(tenant_slug: str, start: datetime, end: datetime) -> list[dict[str, Any]]:
    rows = (UsageRecord.objects.filter(tenant__slug=tenant_slug, hour__gte=start, hour__lt=end)
            .values("flavor__name").annotate(u=ExactSum("unit_seconds"), g=ExactSum("gpu_equivalent_seconds"))
            .order_by("flavor__name"))
    return [{"flavor": r["flavor__name"], "unit_seconds": r["u"], "gpu_equivalent_seconds": r["g"]} for r in rows]


def action_error(exc: ActionError) -> CommandError:
    return CommandError("\n".join(f"{field or 'request'}: {reason}" for field, reasons in exc.errors.items()
                                  for reason in reasons))
