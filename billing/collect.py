"""Usage collection: measure a window in the TSDB (billing.metering), store it (billing.actions).

The measurement is a metering `UsageSource` (PromQL against each host cluster's metrics source, from
`gpufleet.core.metrics`); this module only wires the catalog, the host clusters' metrics sources and the
settings to it and hands the result to `actions.store_usage_batches`,
which replaces the window's rows.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

from gpufleet import clock, gcpause
from gpufleet.core import conf, metrics
from gpufleet.core.errors import ActionError
from infra.metrics import MetricsClient
from scheduling.models import Cluster, Flavor, default_cluster_id

from . import actions
from .metering import usage as metering
from .metering.source import PromQLUsageSource, UsageSource
from .models import UsageCollection

HOUR = timedelta(hours=1)
# One measurement task spans this much: its DCGM side is one range query (the hourly method; per query,
# VictoriaMetrics reads every stored block the window touches once, and a block of a 30 s series holds
# up to ~68 h, so a three-day query costs less per day than three one-day ones), its HAMi side one
# per-slot query per day (per-slot subqueries cost more per day over longer windows). Three days still
# leave ten tasks a month to overlap with storing.
TASK = timedelta(days=3)
TASK_HOURS = int(TASK / HOUR)
DAY = timedelta(days=1)
PER_SLOT_CHUNK_HOURS = 24


def flavor_specs() -> list[metering.FlavorSpec]:
    return [
        metering.FlavorSpec(name=f.name, mode=f.mode, model_name=f.gpu_model.dcgm_model_name, weight=f.weight,
                            mig_profile=f.mig_profile if f.mode == metering.MIG else "")
        for f in Flavor.objects.select_related("gpu_model").order_by("name")
    ]


def options() -> dict[str, object]:
    return {
        "scrape_interval": conf.SCRAPE_INTERVAL,
        "max_gap_scrapes": conf.MAX_GAP_SCRAPES,
        "share_rule": conf.HAMI_SHARE_RULE,
        "usage_metric": conf.USAGE_METRIC,
        "dialect": metrics.dialect(),
    }


def metrics_client() -> MetricsClient:
    """The platform's shared metrics source."""
    return metrics.client()


def usage_source(querier: metering.RangeQuerier) -> UsageSource:
    """How the collector measures one metrics source: PromQL in the configured dialect and settings."""
    return PromQLUsageSource(querier, cluster_label=conf.METRICS_CLUSTER_LABEL,
                             chunk_hours=PER_SLOT_CHUNK_HOURS, hourly_chunk_hours=TASK_HOURS,
                             **options())  # type: ignore[arg-type]


def cluster_sources() -> list[tuple[str, list[metering.ClusterSource]]]:
    """(metrics URL, the clusters measured from it): a cluster's own `metrics_url`, else the platform's
    GPUFLEET_METRICS_URL ("" when unset); clusters sharing a source are told apart by `metrics_label`."""
    if not Cluster.objects.exists():
        default_cluster_id()  # a flushed database: usage without a cluster is the default cluster's
    groups: dict[str, list[metering.ClusterSource]] = defaultdict(list)
    for cluster in Cluster.objects.order_by("name").only("name", "metrics_url", "metrics_label"):
        groups[metrics.url_of(cluster)].append(metering.ClusterSource(cluster.name, cluster.metrics_label))
    return sorted(groups.items())


def collect(start: datetime, end: datetime, client: metering.RangeQuerier | None = None,
            clients: Mapping[str, metering.RangeQuerier] | None = None) -> UsageCollection:
    """Measure [start, end) on every cluster and replace the stored usage of that window.

    `client` queries the platform's shared metrics source, `clients` (by URL) the clusters with a
    source of their own (default: a MetricsClient per URL). The window is measured three days (`TASK`) and a
    source at a time, up to GPUFLEET_METERING_CONCURRENCY queries in flight, while the main thread writes the
    rows already measured (the TSDB and PostgreSQL work at the same time); the write is still one
    transaction over the whole window (`actions.store_usage_batches`)."""
    specs = flavor_specs()
    shared = metrics.platform_url()
    tasks = []
    for url, clusters in cluster_sources():
        querier = (clients or {}).get(url) or (client if url == shared and client is not None else None)
        source = usage_source(querier if querier is not None else metrics.client_at(url))
        tasks += [(source, clusters, lower, upper) for lower, upper in _spans(start, end)]
    in_flight = max(1, conf.METERING_CONCURRENCY)

    def measure(source: UsageSource, clusters: list[metering.ClusterSource], lower: datetime,
                upper: datetime) -> metering.Report:
        return source.measure(specs, lower, upper, clusters=clusters)

    def batches(pool: ThreadPoolExecutor) -> Iterator[tuple[list[metering.UsageSample], list[str]]]:
        pending: deque[Future[metering.Report]] = deque()
        queue = iter(tasks)
        for task in queue:  # keep `in_flight` measurements running ahead of the writer
            pending.append(pool.submit(measure, *task))
            if len(pending) >= in_flight:
                break
        while pending:
            try:
                report = pending.popleft().result()
            except metering.MeteringInputError as exc:
                raise ActionError({exc.field: [exc.reason]}) from exc
            task = next(queue, None)
            if task is not None:
                pending.append(pool.submit(measure, *task))
            yield report.samples, sorted({
                f"{u.tenant_slug}: {u.mode} {u.model_name} {u.mig_profile}".strip()
                + (f" on {u.cluster}" if u.cluster else "") for u in report.unmatched})

    pool = ThreadPoolExecutor(max_workers=in_flight, thread_name_prefix="billing-measure")
    # Decoding, totalling and storing a month allocate millions of short-lived lists and tuples and build
    # no reference cycles: the cyclic collector's passes over them cost more than the work (gcpause).
    with gcpause.paused():
        try:
            return actions.store_usage_batches(start, end, batches(pool))
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


def _spans(start: datetime, end: datetime) -> Iterator[tuple[datetime, datetime]]:
    """`TASK`s, but the last `TASK` of the window a day at a time: rows are stored while later spans are
    measured, so what is left to store after the TSDB's last answer is one day's, not three days'."""
    cursor, tail = start, end - TASK
    while cursor < end:
        upper = min(cursor + (TASK if cursor + TASK <= tail else DAY), end)
        yield cursor, upper
        cursor = upper


def recent_window(now: datetime | None = None) -> tuple[datetime, datetime]:
    """The last few whole hours whose numbers have settled (no later scrape can change them)."""
    now = now or clock.now()
    opts = options()
    end = now.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    while metering.settles_at(end, scrape_interval=opts["scrape_interval"],  # type: ignore[arg-type]
                              max_gap_scrapes=opts["max_gap_scrapes"]) > now:  # type: ignore[arg-type]
        end -= HOUR
    return end - HOUR * conf.COLLECT_LOOKBACK_HOURS, end
