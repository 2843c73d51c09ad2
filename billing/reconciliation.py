"""Measured GPU-equivalent hours vs OpenCost's `gpuHours`, per tenant and month, with the likely cause.

OpenCost bills *requests* (requested GPUs x running hours), cannot see MIG resources, and counts a
HAMi share as a whole GPU (opencost/opencost#3828, #3900). So differences have typical shapes:

* OpenCost higher and the tenant holds HAMi shares -> "hami_counted_whole": OpenCost bills each
  share as 1 GPU; we bill the measured fraction.
* OpenCost lower and the tenant holds MIG instances -> "mig_unsupported": MIG resources
  (nvidia.com/mig-*) are not GPUs to OpenCost, so their hours are missing there.
* OpenCost higher without HAMi (or beyond what HAMi explains) -> "requests_never_used": GPUs were
  requested (pods pending, crash-looping, or not attributed by the exporter) but never held.
* OpenCost lower without MIG -> "opencost_missing_usage" (pods OpenCost did not price).

`compare` is pure; `report` gathers the rows (usage from the DB, OpenCost through infra.opencost).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

from gpufleet.core import conf, sharing

HOURS_QUANTUM = Decimal("0.001")
HOUR = Decimal(3600)

CAUSES = {
    "hami_counted_whole": "HAMi shares counted as whole GPUs by OpenCost",
    "mig_unsupported": "MIG instances are invisible to OpenCost",
    "requests_never_used": "GPUs requested but never held (OpenCost bills requests)",
    "opencost_missing_usage": "usage OpenCost did not see",
}


class Measured:
    """A tenant's measured GPU-equivalent seconds in the month, by flavor mode: `Measured(whole=..., hami=...)`,
    every mode of the sharing-mode registry (in its order), 0 where not given."""

    __slots__ = ("seconds",)

    def __init__(self, **seconds: Decimal) -> None:
        unknown = set(seconds) - set(sharing.NAMES)
        if unknown:
            raise TypeError(f"not a sharing mode: {', '.join(sorted(unknown))}")
        self.seconds: dict[str, Decimal] = {mode: seconds.get(mode, Decimal(0)) for mode in sharing.NAMES}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Measured) and other.seconds == self.seconds

    def __hash__(self) -> int:
        return hash(tuple(self.seconds.items()))

    def __repr__(self) -> str:
        return f"Measured({', '.join(f'{m}={s!r}' for m, s in self.seconds.items())})"

    @property
    def total(self) -> Decimal:
        first, *rest = self.seconds.values()
        return sum(rest, first)


@dataclass(frozen=True)
class OpenCostView:
    gpu_hours: Decimal | None
    gpu_cost: Decimal | None
    total_cost: Decimal | None = None


@dataclass
class Row:
    tenant: str
    namespace: str
    measured_gpu_hours: Decimal
    measured_by_mode: dict[str, Decimal]
    opencost_gpu_hours: Decimal | None
    opencost_gpu_cost: Decimal | None
    delta_gpu_hours: Decimal | None
    delta_ratio: Decimal | None
    flagged: bool
    causes: list[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        """"no_opencost_data" when the OpenCost side is empty (not configured, or nothing for this
        namespace): an empty side is not agreement, so it never reads "ok". Else "flagged" or "ok"."""
        if self.opencost_gpu_hours is None:
            return "no_opencost_data"
        return "flagged" if self.flagged else "ok"

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["status"] = self.status
        for key, value in list(data.items()):
            if isinstance(value, Decimal):
                data[key] = format(value, "f")
        data["measured_by_mode"] = {k: format(v, "f") for k, v in self.measured_by_mode.items()}
        data["cause_descriptions"] = [CAUSES[c] for c in self.causes]
        return data


def _hours(seconds: Decimal) -> Decimal:
    return (seconds / HOUR).quantize(HOURS_QUANTUM, rounding=ROUND_HALF_EVEN)


def compare(tenant: str, measured: Measured, opencost: OpenCostView | None, *, tolerance: Decimal,
            min_gpu_hours: Decimal) -> Row:
    hours = _hours(measured.total)
    by_mode = {mode: _hours(seconds) for mode, seconds in measured.seconds.items()}
    namespace = f"tenant-{tenant}"
    if opencost is None or opencost.gpu_hours is None:
        return Row(tenant, namespace, hours, by_mode, None, None, None, None, flagged=hours > 0,
                   causes=["opencost_missing_usage"] if hours > 0 else [])
    theirs = opencost.gpu_hours.quantize(HOURS_QUANTUM, rounding=ROUND_HALF_EVEN)
    delta = theirs - hours
    base = max(hours, theirs)
    ratio = (abs(delta) / base).quantize(Decimal("0.0001")) if base else Decimal(0)
    flagged = abs(delta) > min_gpu_hours and ratio > tolerance
    causes: list[str] = []
    if flagged:
        hami, mig = by_mode[sharing.HAMI.name] > 0, by_mode[sharing.MIG.name] > 0
        # Shares counted whole push OpenCost up, MIG pushes it down; with both, both are named.
        if hami and (delta > 0 or mig):
            causes.append("hami_counted_whole")
        if mig and (delta < 0 or hami):
            causes.append("mig_unsupported")
        if delta > 0 and not hami:
            causes.append("requests_never_used")
        if delta < 0 and not mig:
            causes.append("opencost_missing_usage")
    return Row(tenant, namespace, hours, by_mode, theirs, opencost.gpu_cost, delta, ratio, flagged, causes)


def rows(measured: Mapping[str, Measured], opencost: Mapping[str, OpenCostView] | None, *, tolerance: Decimal,
         min_gpu_hours: Decimal) -> list[Row]:
    """Every tenant with measured usage or an OpenCost allocation in its namespace. `opencost` None
    means no OpenCost is configured: the measured side is listed and nothing is flagged."""
    if opencost is None:
        return [Row(slug, f"tenant-{slug}", _hours(m.total),
                    {mode: _hours(seconds) for mode, seconds in m.seconds.items()},
                    None, None, None, None, flagged=False) for slug, m in sorted(measured.items())]
    slugs = set(measured) | {ns.removeprefix("tenant-") for ns in opencost if ns.startswith("tenant-")}
    return [compare(slug, measured.get(slug, Measured()), opencost.get(f"tenant-{slug}"),
                    tolerance=tolerance, min_gpu_hours=min_gpu_hours) for slug in sorted(slugs)]


def measured_by_tenant(start: Any, end: Any) -> dict[str, Measured]:
    """Measured GPU-equivalent seconds per tenant and flavor mode in [start, end) (reads the DB)."""
    from .models import UsageRecord
    from .sums import ExactSum

    out: dict[str, dict[str, Decimal]] = {}
    for row in (UsageRecord.objects.filter(hour__gte=start, hour__lt=end)
                .values("tenant__slug", "flavor__mode").annotate(g=ExactSum("gpu_equivalent_seconds"))):
        out.setdefault(row["tenant__slug"], {})[row["flavor__mode"]] = row["g"]
    return {slug: Measured(**{k: v for k, v in modes.items() if k in sharing.NAMES})
            for slug, modes in out.items()}


def report(start: Any, end: Any, opencost: Mapping[str, OpenCostView] | None) -> list[Row]:
    return rows(measured_by_tenant(start, end), opencost, tolerance=conf.RECONCILE_TOLERANCE,
                min_gpu_hours=conf.RECONCILE_MIN_GPU_HOURS)
