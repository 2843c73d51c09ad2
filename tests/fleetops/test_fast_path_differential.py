"""Differential test in the real VictoriaMetrics: the fast paths against the per-slot reference paths.

The fast paths (`promql.slot_masks` + `measure.dcgm_idle_runs` for idle runs, `active_hourly_fast` and
`memory_hourly_fast` for utilisation) evaluate per raw series and bridge gaps on the series' own samples;
the reference paths (`promql.idle_masks` via `measure._runs_of`, `active_hourly_slots`,
`memory_hourly_slots`) evaluate billing's bridged `held(k)` and the idle expression per allocation and
slot inside the TSDB. On randomised traces carrying the scrape pitfalls (missed scrapes alone and in runs
longer than the bridge, HA replicas, old label names, MIG, the GPU_UTIL fallback, activity exactly at a
threshold, holds starting and ending mid-hour) both must give the same runs to the second and the same
hourly sums. Activity values are multiples of 1/64 and memory whole MiB, so every float sum is exact in
either order of addition and the comparison can be exact too.
"""

from __future__ import annotations

import random
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from billing.metering.usage import FlavorIndex, FlavorSpec
from infra.metrics import MetricsClient
from scheduling.fleetops import measure
from scheduling.fleetops.promql import ActivityQueries, with_templates
from tests.support.activity_series import Activity, gpu_activity_lines
from tests.support.dcgm_series import Gpu, Hold, Timeline

H100, A100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100 80GB PCIe"
FLAVORS = (FlavorSpec("h100", "whole", H100, Decimal(1)),
           FlavorSpec("a100-3g", "mig", A100, Decimal("0.4286"), "3g.40gb"))
T0 = datetime(2025, 3, 3, 8, 0, tzinfo=UTC)  # fixed: the test never depends on today's date
HOURS = 5
INTERVAL = 30
# Around the 5 % thresholds, including exactly at them (not idle: idle is strictly below).
ENGINE = (0.0, 1 / 64, 3 / 64, 0.05, 0.25, 53 / 64)
DRAM = (0.0, 2 / 64, 0.05, 0.5)
UTIL = (0.0, 2.0, 4.0, 5.0, 60.0, 97.0)


def _segments(rng: random.Random, start: datetime, end: datetime, profiled: bool, util: bool) -> tuple[Activity, ...]:
    """Activity changing every 1-40 minutes; long low stretches so that runs of an hour and more occur."""
    out, t = [], start
    while t < end:
        length = timedelta(minutes=rng.choice((1, 3, 7, 20, 40, 70, 95)))
        low = rng.random() < 0.5
        engine = rng.choice(ENGINE[:3] if low else ENGINE) if profiled else None
        dram = rng.choice(DRAM[:2] if low else DRAM) if profiled else None
        out.append(Activity(t, min(t + length, end), engine=engine, dram=dram,
                            util=rng.choice(UTIL[:3] if low else UTIL) if util else None,
                            fb_mib=rng.choice((0, 512, 2048, 30211))))
        t += length
    return tuple(out)


def _missed(rng: random.Random, slots: int) -> frozenset[int]:
    """Single missed scrapes and runs of 2-6 (the bridge spans at most 3)."""
    missed = {rng.randrange(slots) for _ in range(slots // 30)}
    for _ in range(3):
        first = rng.randrange(slots)
        missed |= set(range(first, first + rng.randint(2, 6)))
    return frozenset(i for i in missed if 0 <= i < slots)


def _trace(seed: int, twin_gaps: bool = True) -> list[str]:
    rng = random.Random(seed)
    end = T0 + timedelta(hours=HOURS)
    tl = Timeline(start=T0, end=end, interval=INTERVAL, phase=7, jitter_ms=(0, 3, 11, 2) if seed % 2 else ())
    lines: list[str] = []
    kinds = ("whole", "whole", "replicas", "old-util", "util", "mig", "mig")
    for number, kind in enumerate(kinds):
        a = T0 + timedelta(minutes=rng.choice((0, 0, 13, 47)))
        b = end - timedelta(minutes=rng.choice((0, 0, 29, 61)))
        slots = int((b - a).total_seconds()) // INTERVAL
        mig = kind == "mig"
        profiled = kind in ("whole", "replicas", "mig")
        util = kind in ("old-util", "util") or (kind == "whole" and number == 1)  # both signals: profiling wins
        segments = _segments(rng, a, b, profiled, util)
        hold = Hold(f"tenant-t{number % 3}", f"pod-{seed}-{number}", a, b, missed=_missed(rng, slots))
        extra = {"mig_profile": "3g.40gb", "mig_id": str(number % 2 + 1)} if mig else {}
        gpu = Gpu(f"GPU-{number // 2 if mig else number}", A100 if mig else H100, holds=(hold,), index=number,
                  old_label_names=kind == "old-util", **extra)  # type: ignore[arg-type]
        lines += gpu_activity_lines(tl, gpu, segments)
        if kind == "replicas":  # a second HA replica with its own missed scrapes
            twin = Gpu(gpu.uuid, H100, index=number, replicas=({"instance": "b:9400", "job": "dcgm",
                                                               "prometheus_replica": "r2"},),
                       holds=(Hold(hold.namespace, hold.pod, a, b,
                                   missed=_missed(rng, slots) if twin_gaps else hold.missed),))
            lines += gpu_activity_lines(tl, twin, segments)
    return lines


def _hourly(client: MetricsClient, query: str, s: int) -> dict[tuple[str, str, str, str], Decimal]:
    out: dict[tuple[str, str, str, str], Decimal] = defaultdict(Decimal)
    for series in client.range(with_templates(query), T0 + timedelta(hours=1), T0 + timedelta(hours=HOURS), 3600):
        key = tuple(series.labels.get(k, "") for k in ("namespace", "modelName", "GPU_I_PROFILE"))
        for sample in series.samples:
            if sample.value.is_finite():  # Decimal(float) is exact: no rounding hides a difference
                out[(str(int(sample.timestamp)), *key)] += sample.value * s  # type: ignore[index]
    return dict(out)


def _setup(metrics, seed: int, twin_gaps: bool = True):  # type: ignore[no-untyped-def]
    metrics.import_prometheus(_trace(seed, twin_gaps))
    options = measure.Options(scrape_interval=INTERVAL)
    return MetricsClient(metrics.url), options, ActivityQueries(options.query_settings())


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_fast_idle_runs_equal_the_per_slot_reference(metrics, seed: int) -> None:  # type: ignore[no-untyped-def]
    client, options, queries = _setup(metrics, seed)
    index = FlavorIndex(FLAVORS)
    start, end = T0, T0 + timedelta(hours=HOURS)

    def key(run: measure.IdleRun) -> tuple:
        return (run.pod, run.device, run.mig_instance, run.start, run.end, run.idle_seconds, run.ongoing, run.signal)

    fast = sorted(key(r) for r in measure.dcgm_idle_runs(client, queries, index, start, end, options, set()))
    slots = sorted(key(r) for r in measure._runs_of(client, queries, index, start, end, INTERVAL, False))
    assert fast, "the trace has idle runs"
    assert fast == slots


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
@pytest.mark.parametrize("twin_gaps", [False, True])
def test_fast_hourly_sums_equal_the_per_slot_reference(metrics, seed: int, twin_gaps: bool) -> None:  # type: ignore[no-untyped-def]
    client, _, queries = _setup(metrics, seed, twin_gaps)
    for fast_query, slot_query in ((queries.active_hourly_fast(), queries.active_hourly_slots()),
                                   (queries.memory_hourly_fast(), queries.memory_hourly_slots())):
        fast_sums, slot_sums = _hourly(client, fast_query, INTERVAL), _hourly(client, slot_query, INTERVAL)
        assert fast_sums, "the trace has allocations"
        assert fast_sums == slot_sums
