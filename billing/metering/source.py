"""Where measured usage comes from, as billing sees it: a `UsageSource` measures a window for some clusters.

The collector (`billing.collect`) depends on this seam only; `PromQLUsageSource` is the implementation that
measures inside a Prometheus-API TSDB (`usage.measure_report`, queries in `promql`), in the dialect the
metrics source speaks. Another source of usage (an accounting export, a scheduler's records) is another
implementation of the same Protocol, with the collector unchanged. Pure: no Django.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from . import usage


class UsageSource(Protocol):
    """Measures GPU usage per (tenant, flavor, hour, cluster) in [start, end) (usage's module contract)."""

    def measure(self, flavors: Sequence[usage.FlavorSpec], start: datetime, end: datetime, *,
                clusters: Sequence[usage.ClusterSource] = ()) -> usage.Report: ...


@dataclass(frozen=True)
class PromQLUsageSource:
    """Usage measured by PromQL/MetricsQL queries against one metrics source (`client`)."""

    client: usage.RangeQuerier
    dialect: str = "metricsql"
    scrape_interval: int = usage.DEFAULT_SCRAPE_INTERVAL
    max_gap_scrapes: int = usage.DEFAULT_MAX_GAP_SCRAPES
    share_rule: str = "max"
    usage_metric: str = usage.DEFAULT_USAGE_METRIC
    cluster_label: str = usage.DEFAULT_CLUSTER_LABEL
    chunk_hours: int = 24
    hourly_chunk_hours: int | None = None

    def measure(self, flavors: Sequence[usage.FlavorSpec], start: datetime, end: datetime, *,
                clusters: Sequence[usage.ClusterSource] = ()) -> usage.Report:
        return usage.measure_report(
            self.client, flavors, start, end, scrape_interval=self.scrape_interval,
            max_gap_scrapes=self.max_gap_scrapes, share_rule=self.share_rule, usage_metric=self.usage_metric,
            chunk_hours=self.chunk_hours, dialect=self.dialect, clusters=clusters, cluster_label=self.cluster_label,
            hourly_chunk_hours=self.hourly_chunk_hours)
