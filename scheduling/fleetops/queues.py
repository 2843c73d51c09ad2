"""Queue waits, pending demand and the two capacity signals, from Kueue's own metrics. Pure: builds
PromQL (valid for Prometheus and VictoriaMetrics alike), alerting-rule objects and reads answers; the
caller passes the metrics client.

Kueue labels its metrics by ClusterQueue; a tenant's ClusterQueue is `tenant-<slug>` (scheduling.render)
and its flavors are the ones it has quota in. Replica copies (HA Prometheus pairs, Kueue's leader and
followers: `replica_role`) are collapsed with `max by` before anything is added up.

Signals (defaults; the fleet settings change them):
* add capacity for flavor F: the p90 admission wait of the ClusterQueues with quota in F, over the last
  30 minutes (`kueue_admission_wait_time_seconds`, a histogram), is above 30 minutes while they have
  pending workloads.
* expansion review for flavor F: Kueue's admitted usage of F's GPU resource
  (`kueue_cluster_queue_resource_usage`, needs `metrics.enableClusterQueueResources`) averaged over 30 days
  is at least 80 % of the flavor's capacity.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any, Protocol

WAIT = "kueue_admission_wait_time_seconds_bucket"
PENDING = "kueue_pending_workloads"
USAGE = "kueue_cluster_queue_resource_usage"
RESOURCE_PENDING = "kueue_cluster_queue_resource_pending"
RULE_KINDS = {"PrometheusRule": "monitoring.coreos.com/v1", "VMRule": "operator.victoriametrics.com/v1beta1"}


class InstantQuerier(Protocol):
    def instant(self, query: str, at: datetime) -> list: ...


@dataclass(frozen=True)
class FlavorQueues:
    flavor: str
    resource: str  # the extended resource Kueue accounts (nvidia.com/gpu, nvidia.com/mig-3g.40gb, ...)
    capacity: int  # units the fleet offers
    cluster_queues: tuple[str, ...]  # ClusterQueues with quota in the flavor


@dataclass(frozen=True)
class SignalSettings:
    wait_seconds: int = 1800
    wait_quantile: Decimal = Decimal("0.9")
    wait_window: str = "30m"
    allocation_ratio: Decimal = Decimal("0.8")
    allocation_window: str = "30d"


@dataclass(frozen=True)
class Signal:
    kind: str  # add-capacity | expansion-review
    flavor: str
    value: Decimal  # p90 wait (s) | average allocation ratio
    message: str


def _queues(fq: FlavorQueues) -> str:
    return "|".join(fq.cluster_queues) or "^$"


def wait_expr(fq: FlavorQueues, cfg: SignalSettings) -> str:
    """The flavor's worst p-quantile admission wait (s) among its ClusterQueues with pending workloads.

    Kueue observes `kueue_admission_wait_time_seconds` when it admits a workload, so a ClusterQueue that
    admitted nothing in the window has all-zero bucket increases and `histogram_quantile` is NaN there
    (Prometheus' documented behaviour for an empty histogram); NaN compares false, so the worst case -- a
    queue where nothing gets in at all -- never alerted. `>= 0` drops the NaN, and a stalled queue (workloads
    pending a whole threshold ago and ever since, none admitted meanwhile: the oldest has waited at least
    the threshold) counts as waiting exactly the threshold."""
    sel = f'cluster_queue=~"{_queues(fq)}"'
    quantile = (f"histogram_quantile({cfg.wait_quantile}, sum by (cluster_queue, le) "
                f"(max by (cluster_queue, le, priority_class) (increase({WAIT}{{{sel}}}[{cfg.wait_window}]))))")
    pending = f"(max by (cluster_queue) ({PENDING}{{{sel}}}) > 0)"
    span = f"{cfg.wait_seconds}s"
    admitted = (f'(sum by (cluster_queue) (max by (cluster_queue, priority_class) '
                f'(increase({WAIT}{{{sel},le="+Inf"}}[{span}]))) > 0)')
    stalled = (f"((min_over_time((max by (cluster_queue) ({PENDING}{{{sel}}}))[{span}:1m]) > 0) "
               f"and on (cluster_queue) (max by (cluster_queue) ({PENDING}{{{sel}}} offset {span}) > 0) "
               f"unless on (cluster_queue) {admitted})")
    return (f"max((({quantile}) >= 0 and on (cluster_queue) {pending}) "
            f"or on (cluster_queue) ({stalled} * 0 + {cfg.wait_seconds}))")


def allocation_expr(fq: FlavorQueues, cfg: SignalSettings) -> str:
    """The flavor's admitted usage over its capacity, averaged over the window (hourly points)."""
    usage = (f'sum(max by (cluster_queue) ({USAGE}{{flavor="{fq.flavor}", resource="{fq.resource}"}}))')
    return f"avg_over_time(({usage})[{cfg.allocation_window}:1h]) / {max(fq.capacity, 1)}"


def rules(flavors: Sequence[FlavorQueues], cfg: SignalSettings) -> list[dict[str, Any]]:
    out = []
    for fq in flavors:
        out.append({
            "alert": "GpuFleetAddCapacity",
            "expr": f"{wait_expr(fq, cfg)} >= {cfg.wait_seconds}",
            "labels": {"severity": "warning", "flavor": fq.flavor},
            "annotations": {
                "summary": f"Add capacity for flavor {fq.flavor}",
                "description": (f"p{int(cfg.wait_quantile * 100)} queue wait over {cfg.wait_window} is "
                                "{{ $value | humanizeDuration }} (threshold "
                                f"{cfg.wait_seconds} s) for ClusterQueues with quota in {fq.flavor}."),
            },
        })
        if fq.capacity > 0:
            out.append({
                "alert": "GpuFleetExpansionReview",
                "expr": f"{allocation_expr(fq, cfg)} >= {cfg.allocation_ratio}",
                "labels": {"severity": "info", "flavor": fq.flavor},
                "annotations": {
                    "summary": f"Expansion review for flavor {fq.flavor}",
                    "description": (f"{fq.flavor} averaged {{{{ $value | humanizePercentage }}}} of its "
                                    f"{fq.capacity} units over {cfg.allocation_window} (threshold "
                                    f"{cfg.allocation_ratio * 100:.0f} %)."),
                },
            })
    return out


def rule_object(kind: str, namespace: str, flavors: Sequence[FlavorQueues], cfg: SignalSettings,
                labels: dict[str, str]) -> dict[str, Any]:
    """A PrometheusRule (Prometheus Operator) or VMRule (VictoriaMetrics operator) with both signals."""
    if kind not in RULE_KINDS:
        raise ValueError(f"rule kind must be one of {', '.join(RULE_KINDS)}")
    return {
        "apiVersion": RULE_KINDS[kind], "kind": str(kind),
        "metadata": {"name": "gpufleet-capacity", "namespace": namespace, "labels": labels},
        "spec": {"groups": [{"name": "gpufleet-capacity", "interval": "1m", "rules": rules(flavors, cfg)}]},
    }


def evaluate(client: InstantQuerier, flavors: Iterable[FlavorQueues], cfg: SignalSettings,
             at: datetime) -> list[Signal]:
    """The same rules, evaluated by the platform itself (the portal needs no Alertmanager)."""
    out = []
    for fq in flavors:
        for series in client.instant(wait_expr(fq, cfg), at):
            wait = series.value
            if wait.is_finite() and wait >= cfg.wait_seconds:
                out.append(Signal("add-capacity", fq.flavor, wait,
                                  f"Add capacity for flavor {fq.flavor}: p{int(cfg.wait_quantile * 100)} queue "
                                  f"wait {wait:.0f} s over {cfg.wait_window} (threshold {cfg.wait_seconds} s)."))
        if fq.capacity <= 0:
            continue
        for series in client.instant(allocation_expr(fq, cfg), at):
            ratio = series.value
            if ratio.is_finite() and ratio >= cfg.allocation_ratio:
                used = ratio * fq.capacity
                out.append(Signal("expansion-review", fq.flavor, ratio,
                                  f"Expansion review for flavor {fq.flavor}: {used:.1f} of {fq.capacity} units "
                                  f"allocated on average over {cfg.allocation_window} ({ratio:.1%}, threshold "
                                  f"{cfg.allocation_ratio:.0%})."))
    return out


def wait_by_queue(client: InstantQuerier, at: datetime, window: str = "30m") -> dict[str, dict[str, Decimal]]:
    """Per ClusterQueue now: p50 and p90 admission wait over the window, pending workloads."""
    out: dict[str, dict[str, Decimal]] = {}
    for name, q in (("p50_wait_seconds", "0.5"), ("p90_wait_seconds", "0.9")):
        expr = (f"histogram_quantile({q}, sum by (cluster_queue, le) (max by (cluster_queue, le, priority_class) "
                f"(increase({WAIT}[{window}]))))")
        for series in client.instant(expr, at):
            if series.value.is_finite():
                out.setdefault(series.labels.get("cluster_queue", ""), {})[name] = series.value
    for series in client.instant(f"sum by (cluster_queue) (max by (cluster_queue, status) ({PENDING}))", at):
        out.setdefault(series.labels.get("cluster_queue", ""), {})["pending_workloads"] = series.value
    for series in client.instant(f"max by (cluster_queue, resource) ({RESOURCE_PENDING})", at):
        row = out.setdefault(series.labels.get("cluster_queue", ""), {})
        row[f"pending {series.labels.get('resource', '')}"] = series.value
    return out
