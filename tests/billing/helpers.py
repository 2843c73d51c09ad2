"""Rows for billing tests: GPU models, flavors, tenants, usage and prices."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from billing import actions
from scheduling.models import Flavor, GpuModel
from tests.support import factories


def catalog() -> dict[str, Flavor]:
    a100, _ = GpuModel.objects.get_or_create(
        name="a100-80gb", defaults={"dcgm_model_name": "NVIDIA A100-SXM4-80GB", "memory_mib": 81920})
    specs = {
        "a100": dict(mode="whole", weight=Decimal(1), capacity=8),
        "a100-3g": dict(mode="mig", mig_profile="3g.40gb", weight=Decimal("0.4286"), capacity=4),
        "a100-share25": dict(mode="hami", memory_percent=25, cores_percent=25, weight=Decimal("0.25"), capacity=8),
    }
    out = {}
    for name, spec in specs.items():
        out[name], _ = Flavor.objects.get_or_create(name=name, defaults={"gpu_model": a100, **spec})
    return out


def hour(year: int, month: int, day: int, h: int = 0) -> datetime:
    return datetime(year, month, day, h, tzinfo=UTC)


def sample(tenant: str, flavor: Flavor, at: datetime, unit_seconds: str | Decimal) -> actions.Sample:
    units = Decimal(unit_seconds)
    return actions.Sample(tenant, flavor.name, at, units, (units * flavor.weight).quantize(Decimal("0.001")))


def usage(start: datetime, end: datetime, samples: list[actions.Sample]):
    return actions.store_usage(start, end, samples)


def hours(start: datetime, count: int) -> list[datetime]:
    return [start + timedelta(hours=i) for i in range(count)]


def tenants(*slugs: str, owner=None):
    return [factories.tenant(slug, "trusted", owner=owner, phase="ready") for slug in slugs]
