"""Utilisation and idle runs per allocation, measured inside the TSDB. Pure: no Django.

* `utilisation(...)`: per (hour, tenant, flavor): allocated seconds exactly as billing measures them
  (`billing.metering.usage.measure_report`, unchanged), active seconds (allocation x activity, see
  `promql`), and MiB-seconds of memory held.
* `idle_runs(...)`: every contiguous idle run of an allocation (DCGM identity or HAMi share) in a window.
  The TSDB returns only the run edges — the first and last idle slot of each run and the slots where the
  memory held changed inside one — so the answer is proportional to the number of runs, not of slots;
  Python pairs the edges. Minimum durations are applied by the caller (they are per tenant).

Slot k covers [k·s - s, k·s) (billing's grid); a range query at step s evaluated at t = k·s reports slot k.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from billing.metering import usage as billing_usage
from billing.metering.promql import DCGM_IDENTITY, HAMI_IDENTITY, QuerySettings
from billing.metering.usage import HAMI, MIG, WHOLE, FlavorIndex, FlavorSpec, MeteringInputError, RangeQuerier

from .promql import ActivityQueries, Thresholds, with_templates

HOUR = timedelta(hours=1)
TENANT_PREFIX = billing_usage.TENANT_PREFIX
# VictoriaMetrics refuses range answers over -search.maxPointsPerTimeseries (30,000 by default).
EDGE_POINT_BUDGET = 20_000
EDGE_ORDER = {"start": 0, "change": 1, "end": 2}


@dataclass(frozen=True)
class Options:
    scrape_interval: int = billing_usage.DEFAULT_SCRAPE_INTERVAL
    max_gap_scrapes: int = billing_usage.DEFAULT_MAX_GAP_SCRAPES
    share_rule: str = "max"
    usage_metric: str = billing_usage.DEFAULT_USAGE_METRIC
    dialect: str = "metricsql"

    def query_settings(self) -> QuerySettings:
        try:
            return QuerySettings(self.scrape_interval, self.max_gap_scrapes, self.usage_metric, self.share_rule,
                                 TENANT_PREFIX, self.dialect)
        except ValueError as exc:
            raise MeteringInputError("settings", str(exc)) from exc


@dataclass(frozen=True, order=True)
class Utilisation:
    hour_start: datetime
    tenant_slug: str
    flavor: str
    allocated_seconds: Decimal  # billing's unit_seconds
    allocated_gpu_equivalent_seconds: Decimal
    active_seconds: Decimal
    active_gpu_equivalent_seconds: Decimal
    memory_mib_seconds: Decimal

    @property
    def efficiency(self) -> Decimal | None:
        return None if not self.allocated_seconds else self.active_seconds / self.allocated_seconds


@dataclass(frozen=True)
class ThresholdGroup:
    """Thresholds for a set of tenant namespaces (None = every tenant not in another group)."""

    thresholds: Thresholds
    namespaces: tuple[str, ...] | None = None


@dataclass(frozen=True, order=True)
class IdleRun:
    start: datetime
    tenant_slug: str
    namespace: str
    pod: str
    container: str
    device: str  # GPU UUID (the parent GPU for a MIG instance; the physical GPU for a HAMi share)
    mig_instance: str  # GPU_I_ID, "" when not MIG
    flavor: str
    mode: str
    signal: str  # profiling | gpu_util
    end: datetime  # exclusive; the window end for an ongoing run
    ongoing: bool
    idle_seconds: int
    memory_mib: Decimal  # peak held while idle
    weight: Decimal = field(compare=False)

    @property
    def gpu_equivalent_seconds(self) -> Decimal:
        return Decimal(self.idle_seconds) * self.weight


def _tenant(namespace: str) -> str | None:
    slug = namespace.removeprefix(TENANT_PREFIX)
    return slug if namespace.startswith(TENANT_PREFIX) and slug else None


def _hour_start(timestamp: Decimal) -> datetime:
    return datetime.fromtimestamp(int(timestamp), tz=UTC) - HOUR


def utilisation(client: RangeQuerier, flavors: Sequence[FlavorSpec], start: datetime, end: datetime,
                options: Options = Options(), *, chunk_hours: int = 24) -> list[Utilisation]:
    """Per (hour, tenant, flavor) in [start, end) (whole hours) with any allocation."""
    report = billing_usage.measure_report(
        client, flavors, start, end, scrape_interval=options.scrape_interval,
        max_gap_scrapes=options.max_gap_scrapes, share_rule=options.share_rule,
        usage_metric=options.usage_metric, chunk_hours=chunk_hours, dialect=options.dialect)
    index = FlavorIndex(flavors)
    weights = {f.name: f.weight for f in flavors}
    modes = {f.name: f.mode for f in flavors}
    queries = ActivityQueries(options.query_settings())
    s = Decimal(options.scrape_interval)
    active: dict[tuple[datetime, str, str], Decimal] = defaultdict(Decimal)
    memory: dict[tuple[datetime, str, str], Decimal] = defaultdict(Decimal)
    chunk_hours = max(1, min(chunk_hours, billing_usage.SUBQUERY_POINT_BUDGET * options.scrape_interval // 3600))
    plan = ((with_templates(queries.active_hourly_slots()), active, False),
            (with_templates(queries.memory_hourly_slots()), memory, False),
            (with_templates(queries.hami_active_hourly_share_slots()), active, True),
            (with_templates(queries.hami_memory_hourly_slots()), memory, True))
    cursor = start
    while cursor < end:
        upper = min(cursor + timedelta(hours=chunk_hours), end)
        for query, into, hami in plan:
            for series in client.range(query, cursor + HOUR, upper, 3600):
                tenant = _tenant(series.labels.get("namespace", ""))
                flavor = (index.hami(series.labels.get("device_type", "")) if hami else
                          index.dcgm(series.labels.get("modelName", ""), series.labels.get("GPU_I_PROFILE", "")))
                if tenant is None or flavor is None:
                    continue  # unmatched allocations are reported by billing's measurement
                for sample in series.samples:
                    hour = _hour_start(sample.timestamp)
                    if start <= hour < end and sample.value.is_finite():
                        into[(hour, tenant, flavor.name)] += sample.value * s
        cursor = upper
    out = []
    for row in report.samples:
        key = (row.hour_start, row.tenant_slug, row.flavor)
        act = active.get(key, Decimal(0)).quantize(billing_usage.SECONDS_QUANTUM)
        # HAMi: billing's unit seconds already are GPU fractions (the measured share): weight 1.
        weight = Decimal(1) if modes[row.flavor] == HAMI else weights[row.flavor]
        out.append(Utilisation(row.hour_start, row.tenant_slug, row.flavor, row.unit_seconds,
                               row.gpu_equivalent_seconds, act, (act * weight).quantize(billing_usage.SECONDS_QUANTUM),
                               memory.get(key, Decimal(0)).quantize(billing_usage.SECONDS_QUANTUM)))
    return sorted(out)


def _slot_floor(moment: datetime, s: int) -> datetime:
    ts = int(moment.timestamp())
    return datetime.fromtimestamp(ts - ts % s, tz=UTC)


def check_window(start: datetime, end: datetime) -> None:
    for name, moment in (("start", start), ("end", end)):
        if not isinstance(moment, datetime) or moment.tzinfo is None or moment.utcoffset() != timedelta(0):
            raise MeteringInputError(name, "must be a UTC datetime")
    if start >= end:
        raise MeteringInputError("end", "must be after start")


def idle_runs(client: RangeQuerier, flavors: Sequence[FlavorSpec], start: datetime, end: datetime,
              options: Options = Options(), groups: Iterable[ThresholdGroup] = (ThresholdGroup(Thresholds()),),
              ) -> list[IdleRun]:
    """Every idle run of every allocation in [start, end) (floored to the slot grid), any length."""
    check_window(start, end)
    s = options.scrape_interval
    settings = options.query_settings()
    start, end = _slot_floor(start, s), _slot_floor(end, s)
    if start >= end:
        raise MeteringInputError("end", f"window is shorter than one scrape interval ({s} s)")
    index = FlavorIndex(flavors)
    groups = list(groups)
    named = tuple(ns for g in groups if g.namespaces is not None for ns in g.namespaces)
    runs: list[IdleRun] = []
    for group in groups:
        if group.namespaces is not None and not group.namespaces:
            continue
        queries = ActivityQueries(settings, group.thresholds, namespaces=group.namespaces,
                                  exclude=named if group.namespaces is None else ())
        for hami in (False, True):
            runs += _runs_of(client, queries, index, start, end, s, hami)
    return sorted(runs)


def _runs_of(client: RangeQuerier, queries: ActivityQueries, index: FlavorIndex, start: datetime, end: datetime,
             s: int, hami: bool) -> list[IdleRun]:
    identity = HAMI_IDENTITY if hami else DCGM_IDENTITY
    edges_query = queries.hami_idle_edges() if hami else queries.idle_edges()
    here_query = with_templates(queries.hami_idle_signal() if hami else queries.idle_signal())
    points: dict[tuple[tuple[str, str], ...], list[tuple[int, int, str, Decimal]]] = defaultdict(list)
    labels_of: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}

    def key(labels: dict[str, str]) -> tuple[tuple[str, str], ...]:
        k = tuple((name, labels.get(name, "")) for name in (*identity, "signal", "device_type"))
        labels_of.setdefault(k, dict(labels))
        return k

    first = start + timedelta(seconds=s)
    # Runs already going at the window start have no start edge inside it: ask for slot 1 directly.
    for series in client.range(here_query, first, first, s):
        for sample in series.samples:
            points[key(series.labels)].append((int(sample.timestamp), -1, "open", sample.value))
    step_budget = timedelta(seconds=s * EDGE_POINT_BUDGET)
    cursor = start
    while cursor < end:
        upper = min(cursor + step_budget, end)
        for series in client.range(edges_query, cursor + timedelta(seconds=s), upper, s):
            edge = series.labels.get("edge", "")
            for sample in series.samples:
                points[key(series.labels)].append((int(sample.timestamp), EDGE_ORDER[edge], edge, sample.value))
        cursor = upper
    window_start, window_end = int(start.timestamp()), int(end.timestamp())
    out = []
    for k, items in points.items():
        labels = labels_of[k]
        tenant = _tenant(labels.get("namespace", ""))
        if hami:
            flavor = index.hami(labels.get("device_type", ""))
        else:
            flavor = index.dcgm(labels.get("modelName", ""), labels.get("GPU_I_PROFILE", ""))
        if tenant is None or flavor is None:
            continue
        for run_start, run_end, peak in _pair(sorted(items), s, window_start, window_end):
            out.append(IdleRun(
                start=datetime.fromtimestamp(run_start, tz=UTC), tenant_slug=tenant,
                namespace=labels.get("namespace", ""), pod=labels.get("pod", ""),
                container=labels.get("container", labels.get("container_index", "")),
                device=labels.get("device_uuid" if hami else "UUID", ""),
                mig_instance=labels.get("GPU_I_ID", "") if flavor.mode == MIG else "",
                flavor=flavor.name, mode=flavor.mode if flavor.mode in (WHOLE, MIG, HAMI) else WHOLE,
                signal=labels.get("signal", ""), end=datetime.fromtimestamp(run_end, tz=UTC),
                ongoing=run_end >= window_end, idle_seconds=run_end - run_start,
                memory_mib=peak, weight=flavor.weight))
    return out


def _pair(items: list[tuple[int, int, str, Decimal]], s: int, window_start: int,
          window_end: int) -> Iterable[tuple[int, int, Decimal]]:
    """(start, end exclusive, peak MiB) of each run from its edges, in time order."""
    open_at: int | None = None
    peak = Decimal(0)
    for t, _, edge, value in items:
        if edge == "open":
            open_at, peak = window_start, value
        elif edge == "start":
            if open_at is None:
                open_at, peak = t - s, value
            else:
                peak = max(peak, value)
        elif edge == "change":
            if open_at is None:  # the run began before the window and the slot-1 probe missed it
                open_at, peak = window_start, value
            peak = max(peak, value)
        else:  # end
            if open_at is None:
                open_at, peak = window_start, value
            yield open_at, t, max(peak, value)
            open_at = None
    if open_at is not None:
        yield open_at, window_end, peak
