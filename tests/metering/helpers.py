"""Flavors and a small runner shared by the metering tests."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

from billing.metering.usage import FlavorSpec, Report, measure_report
from infra.metrics import MetricsClient
from tests.support.dcgm_series import Timeline, lines
from tests.support.victoriametrics import VictoriaMetrics

H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100 80GB PCIe"
GIB = 1024**3

FLAVORS = (
    FlavorSpec("h100", "whole", H100, Decimal(1)),
    FlavorSpec("a100", "whole", A100, Decimal(1)),
    FlavorSpec("a100-3g", "mig", A100, Decimal("0.4286"), mig_profile="3g.40gb"),
    FlavorSpec("a100-1g", "mig", A100, Decimal("0.1429"), mig_profile="1g.10gb"),
    FlavorSpec("a100-share", "hami", A100, Decimal("0.25")),
)


def at(year: int, month: int, day: int, hour: int, minute: int = 0, second: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def load(victoria: VictoriaMetrics, timeline: Timeline) -> int:
    return victoria.import_prometheus(lines(timeline))


def run(metrics: MetricsClient, start: datetime, end: datetime, **kwargs) -> Report:
    return measure_report(metrics, FLAVORS, start, end, **kwargs)


def table(report: Report) -> dict[tuple[str, str, int], tuple[Decimal, Decimal]]:
    """{(tenant, flavor, hour-of-day): (unit_seconds, gpu_equivalent_seconds)}"""
    return {(s.tenant_slug, s.flavor, s.hour_start.hour): (s.unit_seconds, s.gpu_equivalent_seconds)
            for s in report.samples}


def units(report: Report) -> dict[tuple[str, str, int], Decimal]:
    return {key: unit for key, (unit, _) in table(report).items()}
