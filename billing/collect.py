"""Usage collection: measure a window in the TSDB (billing.metering), store it (billing.actions).

The measurement is metering's pure `measure_report`; this module only wires the catalog and the
settings to it and hands the result to `actions.store_usage`, which replaces the window's rows.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

from gpufleet import clock
from infra.metrics import MetricsClient
from scheduling.models import Flavor
from tenants.errors import ActionError

from . import actions, conf
from .metering import usage as metering
from .models import UsageCollection

HOUR = timedelta(hours=1)
DAY = timedelta(days=1)


def flavor_specs() -> list[metering.FlavorSpec]:
    return [
        metering.FlavorSpec(name=f.name, mode=f.mode, model_name=f.gpu_model.dcgm_model_name, weight=f.weight,
                            mig_profile=f.mig_profile if f.mode == metering.MIG else "")
        for f in Flavor.objects.select_related("gpu_model").order_by("name")
    ]


def options() -> dict[str, object]:
    return {
        "scrape_interval": int(conf.text("GPUFLEET_SCRAPE_INTERVAL")),
        "max_gap_scrapes": int(conf.text("GPUFLEET_MAX_GAP_SCRAPES")),
        "share_rule": conf.text("GPUFLEET_HAMI_SHARE_RULE"),
        "usage_metric": conf.text("GPUFLEET_USAGE_METRIC"),
    }


def metrics_client() -> MetricsClient:
    return MetricsClient(conf.text("GPUFLEET_METRICS_URL"))


def collect(start: datetime, end: datetime, client: metering.RangeQuerier | None = None) -> UsageCollection:
    """Measure [start, end) and replace the stored usage of that window.

    Windows longer than a day are measured a day at a time in a background thread while the main
    thread writes the previous day's rows (the TSDB and PostgreSQL work at the same time); the
    write is still one transaction over the whole window (`actions.store_usage_batches`)."""
    client = client or metrics_client()
    specs, opts = flavor_specs(), options()
    days = list(_days(start, end))
    results: queue.Queue[object] = queue.Queue(maxsize=2)
    stop = threading.Event()

    def measure() -> None:
        for lower, upper in days:
            if stop.is_set():
                return
            try:
                item: object = metering.measure_report(client, specs, lower, upper, **opts)  # type: ignore[arg-type]
            except BaseException as exc:  # handed to the writer, which raises it
                item = exc
            while not stop.is_set():
                try:
                    results.put(item, timeout=0.5)
                    break
                except queue.Full:
                    continue
            if isinstance(item, BaseException):
                return

    def batches() -> Iterator[tuple[list[metering.UsageSample], list[str]]]:
        for _ in days:
            item = results.get()
            if isinstance(item, metering.MeteringInputError):
                raise ActionError({item.field: [item.reason]}) from item
            if isinstance(item, BaseException):
                raise item
            report = item  # type: ignore[assignment]
            yield report.samples, sorted({f"{u.tenant_slug}: {u.mode} {u.model_name} {u.mig_profile}".strip()
                                          for u in report.unmatched})

    worker = threading.Thread(target=measure, name="billing-measure", daemon=True)
    worker.start()
    try:
        return actions.store_usage_batches(start, end, batches())
    finally:
        stop.set()
        worker.join(timeout=30)


def _days(start: datetime, end: datetime) -> Iterator[tuple[datetime, datetime]]:
    cursor = start
    while cursor < end:
        upper = min(cursor + DAY, end)
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
    return end - HOUR * int(conf.text("GPUFLEET_COLLECT_LOOKBACK_HOURS")), end
