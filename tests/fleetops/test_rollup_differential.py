"""Differential test in the real VictoriaMetrics: reports reading hourly roll-ups against the raw path.

Random traces (`test_fast_path_differential._trace`: missed scrapes alone and in runs longer than the
bridge, HA replicas with their own gaps, old label names, MIG, the GPU_UTIL fallback, activity exactly
at a threshold, holds starting and ending mid-hour, scrape jitter) are rolled up for some hours, then
reports over aligned and non-aligned windows must give the same idle runs (to the second, with signal,
ongoing flag and peak memory) and the same utilisation rows as `measure` over the raw samples, with
thresholds changed between roll-up and report, per-tenant threshold groups, late samples and a second
roll-up run. Each case also checks how many hours were measured raw, so a roll-up that is never read
(or read where it must not be) fails the test.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest

from billing.metering.usage import MeteringInputError
from infra.metrics import MetricsClient
from scheduling.fleetops import measure, rollup
from scheduling.fleetops.promql import Thresholds
from tests.fleetops.test_fast_path_differential import FLAVORS, HOURS, INTERVAL, T0, _trace
from tests.support.activity_series import Activity, gpu_activity_lines
from tests.support.dcgm_series import Gpu, Hold, Timeline

OPTIONS = measure.Options(scrape_interval=INTERVAL)
LATER = T0 + timedelta(days=30)  # a pinned "now" long after the trace: every roll-up is final
DEFAULT = [measure.ThresholdGroup(Thresholds())]
END = T0 + timedelta(hours=HOURS)


def _key(run: measure.IdleRun) -> tuple:
    return (run.tenant_slug, run.namespace, run.pod, run.container, run.device, run.mig_instance, run.flavor,
            run.signal, run.start, run.end, run.ongoing, run.idle_seconds, run.memory_mib)


def _raw(client, start, end, groups, min_seconds: int = 0) -> list[tuple]:  # type: ignore[no-untyped-def]
    return sorted(_key(r) for r in measure.idle_runs(client, FLAVORS, start, end, OPTIONS, groups)
                  if r.idle_seconds >= min_seconds)


def _rolled(client, start, end, groups, **kwargs) -> tuple[list[tuple], int]:  # type: ignore[no-untyped-def]
    runs, raw_hours = rollup.idle_runs(client, FLAVORS, start, end, OPTIONS, groups, **kwargs)
    return sorted(_key(r) for r in runs), raw_hours


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_idle_runs_from_rollups_equal_the_raw_path(metrics, seed: int) -> None:  # type: ignore[no-untyped-def]
    metrics.import_prometheus(_trace(seed))
    client = MetricsClient(metrics.url)
    # Hours 1-3 rolled up (two runs: 1-2 and 3, the second twice), hours 0 and 4 only in raw samples.
    assert rollup.rollup_idle(client, T0 + timedelta(hours=1), T0 + timedelta(hours=3), OPTIONS, DEFAULT, LATER) == 2
    for _ in range(2):
        assert rollup.rollup_idle(client, T0 + timedelta(hours=3), T0 + timedelta(hours=4), OPTIONS, DEFAULT,
                                  LATER) == 1
    raw = _raw(client, T0, END, DEFAULT)
    assert raw, "the trace has idle runs"
    assert _rolled(client, T0, END, DEFAULT) == (raw, 2)
    # Windows not on whole hours: the edge hours' stored bits are clipped (and raw where not rolled up).
    for start, end in ((T0 + timedelta(minutes=77, seconds=30), T0 + timedelta(hours=3, minutes=41)),
                       (T0 + timedelta(minutes=13), END - timedelta(minutes=7, seconds=15)),
                       (T0 + timedelta(hours=2, minutes=5), T0 + timedelta(hours=2, minutes=50))):
        got, raw_hours = _rolled(client, start, end, DEFAULT)
        assert got == _raw(client, start, end, DEFAULT)
        assert raw_hours == sum(1 for h in rollup.hours(rollup.floor_hour(start), rollup.ceil_hour(end))
                                if not T0 + timedelta(hours=1) <= h < T0 + timedelta(hours=4))


@pytest.mark.parametrize("seed", [1, 3])
def test_changed_thresholds_fall_back_to_raw_until_rolled_up_again(metrics, seed: int) -> None:  # type: ignore[no-untyped-def]
    metrics.import_prometheus(_trace(seed))
    client = MetricsClient(metrics.url)
    rollup.rollup_idle(client, T0, END, OPTIONS, DEFAULT, LATER)
    assert _rolled(client, T0, END, DEFAULT) == (_raw(client, T0, END, DEFAULT), 0)
    # Higher thresholds for one tenant, lower for the rest: what is idle changes; no roll-up matches.
    changed = [measure.ThresholdGroup(Thresholds(engine=Decimal("0.03"), dram=Decimal("0.04"),
                                                 gpu_util=Decimal("0.03"))),
               measure.ThresholdGroup(Thresholds(engine=Decimal("0.3"), dram=Decimal("0.6"), gpu_util=Decimal("0.7")),
                                      ("tenant-t1",))]
    want = _raw(client, T0, END, changed)
    assert want != _raw(client, T0, END, DEFAULT)
    assert _rolled(client, T0, END, changed) == (want, HOURS)
    rollup.rollup_idle(client, T0 + timedelta(hours=1), END, OPTIONS, changed, LATER)
    assert _rolled(client, T0, END, changed) == (want, 1)
    assert _rolled(client, T0, END, DEFAULT) == (_raw(client, T0, END, DEFAULT), 0)  # the old roll-ups stay valid
    # One tenant only (the CLI's --tenant): the fleet's roll-ups, filtered; the raw hour narrowed.
    only = frozenset({"tenant-t1"})
    narrowed = [measure.ThresholdGroup(changed[0].thresholds, ()), changed[1]]
    assert _rolled(client, T0, END, changed, namespaces=only) == (_raw(client, T0, END, narrowed), 1)
    # The same with a minimum (run pieces for the rolled-up hours, joined with the raw hour's slots).
    for minimum in (2400, 3600):
        for groups in (changed, DEFAULT):
            assert _rolled(client, T0, END, groups, min_seconds=minimum) == (
                _raw(client, T0, END, groups, minimum), 1 if groups is changed else 0)
        assert _rolled(client, T0, END, changed, namespaces=only, min_seconds=minimum) == (
            _raw(client, T0, END, narrowed, minimum), 1)


def test_late_samples_are_seen_until_the_rollup_is_final(metrics) -> None:  # type: ignore[no-untyped-def]
    metrics.import_prometheus(_trace(2))
    client = MetricsClient(metrics.url)
    hour = T0 + timedelta(hours=2)
    early = hour + timedelta(hours=1, minutes=25)  # settled, but before the late allowance has passed
    assert rollup.rollup_idle(client, hour, hour + timedelta(hours=1), OPTIONS, DEFAULT, early) == 1
    assert rollup.coverage(client, rollup.IDLE, rollup.idle_fingerprint(OPTIONS, DEFAULT), T0, END)
    # A late exporter: an idle GPU whose samples for that hour arrive after the first roll-up.
    tl = Timeline(start=hour, end=hour + timedelta(hours=1), interval=INTERVAL, phase=7)
    late = Gpu("GPU-LATE", FLAVORS[0].model_name, index=40,
               holds=(Hold("tenant-t2", "late-pod", hour, hour + timedelta(hours=1)),))
    metrics.import_prometheus(gpu_activity_lines(tl, late, (Activity(hour, hour + timedelta(hours=1), engine=0.0,
                                                                     dram=0.0, fb_mib=512),)))
    want = _raw(client, T0, END, DEFAULT)
    assert any(r[2] == "late-pod" for r in want)
    assert _rolled(client, T0, END, DEFAULT) == (want, HOURS)  # not final: measured raw
    assert _rolled(client, T0, END, DEFAULT, min_seconds=3600) == (_raw(client, T0, END, DEFAULT, 3600), HOURS)
    assert rollup.plan(rollup.coverage(client, rollup.IDLE, rollup.idle_fingerprint(OPTIONS, DEFAULT), T0, END),
                       T0, END, rollup.DEFAULT_LATE_ALLOWANCE) == [(T0, END)]
    assert rollup.rollup_idle(client, hour, hour + timedelta(hours=1), OPTIONS, DEFAULT, LATER) == 1
    assert _rolled(client, T0, END, DEFAULT) == (want, HOURS - 1)
    late_long = _raw(client, T0, END, DEFAULT, 3600)
    assert any(r[2] == "late-pod" for r in late_long)  # the late GPU's hour-long run, read from its pieces
    assert _rolled(client, T0, END, DEFAULT, min_seconds=3600) == (late_long, HOURS - 1)
    # Not yet settled: nothing is rolled up.
    assert rollup.rollup_idle(client, T0, END, OPTIONS, DEFAULT, END + timedelta(seconds=60)) == HOURS - 1


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_utilisation_from_rollups_equals_the_raw_path(metrics, seed: int) -> None:  # type: ignore[no-untyped-def]
    metrics.import_prometheus(_trace(seed))
    client = MetricsClient(metrics.url)
    assert rollup.rollup_utilisation(client, FLAVORS, T0 + timedelta(hours=1), T0 + timedelta(hours=4), OPTIONS,
                                     LATER) == 3
    raw = measure.utilisation(client, FLAVORS, T0, END, OPTIONS)
    assert raw, "the trace has allocations"
    assert rollup.utilisation(client, FLAVORS, T0, END, OPTIONS) == (raw, 2)
    rollup.rollup_utilisation(client, FLAVORS, T0, END, OPTIONS, LATER)  # again, newer rev over the same hours
    assert rollup.utilisation(client, FLAVORS, T0, END, OPTIONS) == (raw, 0)
    # Another flavor catalog (a weight changed): the stored rows do not match it; measured raw.
    reweighted = (FLAVORS[0], measure.FlavorSpec("a100-3g", "mig", FLAVORS[1].model_name, Decimal("0.5"), "3g.40gb"))
    assert rollup.utilisation(client, reweighted, T0, END, OPTIONS) == (
        measure.utilisation(client, reweighted, T0, END, OPTIONS), HOURS)


def test_an_hour_ending_at_midnight_rolled_up_alone_is_read(metrics) -> None:  # type: ignore[no-untyped-def]
    """Regression: a recorded value stamped exactly at midnight (the hour's end) was not found by
    VictoriaMetrics 1.79 when it was the series' only sample; values are recorded 1 ms before the end."""
    start = T0.replace(hour=22)
    end = start + timedelta(hours=3)
    tl = Timeline(start=start, end=end, interval=INTERVAL, phase=7)
    lines: list[str] = []
    for number, (a, b) in enumerate(((start, end), (start + timedelta(hours=1), start + timedelta(hours=2)))):
        gpu = Gpu(f"GPU-M{number}", FLAVORS[0].model_name, index=number,
                  holds=(Hold(f"tenant-m{number}", f"pod-m{number}", a, b),))
        lines += gpu_activity_lines(tl, gpu, (Activity(a, a + timedelta(minutes=100), engine=0.0, dram=0.0, fb_mib=64),
                                              Activity(a + timedelta(minutes=100), b, engine=0.5, dram=0.5)))
    metrics.import_prometheus(lines)
    client = MetricsClient(metrics.url)
    midnight_hour = start + timedelta(hours=1)
    rollup.rollup_idle(client, midnight_hour, midnight_hour + timedelta(hours=1), OPTIONS, DEFAULT, LATER)
    rollup.rollup_utilisation(client, FLAVORS, midnight_hour, midnight_hour + timedelta(hours=1), OPTIONS, LATER)
    assert _rolled(client, start, end, DEFAULT) == (_raw(client, start, end, DEFAULT), 2)
    rows = measure.utilisation(client, FLAVORS, start, end, OPTIONS)
    assert any(r.tenant_slug == "m1" for r in rows)
    assert rollup.utilisation(client, FLAVORS, start, end, OPTIONS) == (rows, 2)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_utilisation_totals_summed_inside_the_tsdb_equal_the_raw_path(metrics, seed: int) -> None:  # type: ignore[no-untyped-def]
    """Totals per tenant x flavor summed by VictoriaMetrics over runs (revs) of roll-ups: a rev superseded for
    one of its hours, a rev not final yet, data of a run that never recorded its coverage, windows not on
    the runs' edges. Summing any rev over an hour it does not stand for counts that hour twice (or a
    non-final one) and fails the comparison."""
    metrics.import_prometheus(_trace(seed))
    client = MetricsClient(metrics.url)
    h = [T0 + timedelta(hours=i) for i in range(HOURS + 1)]
    assert rollup.rollup_utilisation(client, FLAVORS, h[0], h[3], OPTIONS, LATER) == 3  # rev A: hours 0-2
    # Hour 1 recomputed later (rev B > A): A still stands for hours 0 and 2, not for hour 1.
    assert rollup.rollup_utilisation(client, FLAVORS, h[1], h[2], OPTIONS, LATER + timedelta(minutes=1)) == 1
    # Hour 3 rolled up before it was final (measured raw), hour 4 never rolled up.
    assert rollup.rollup_utilisation(client, FLAVORS, h[3], h[4], OPTIONS,
                                     h[4] + timedelta(minutes=30)) == 1
    fingerprint = rollup.util_fingerprint(OPTIONS, FLAVORS)
    # A run that wrote its data and died before its coverage: never summed.
    orphan = rollup.util_lines(measure.utilisation(client, FLAVORS, h[0], h[2], OPTIONS), fingerprint,
                               rollup._ms(LATER) + 10 ** 6)
    client.import_json_lines(orphan)
    by_rev = rollup.coverage_by_rev(client, rollup.UTIL, fingerprint, T0, END)
    assert len(by_rev) == 3 and sorted(len(v) for v in by_rev.values()) == [1, 1, 3]
    for start, end, raw_hours in ((h[0], h[5], 2), (h[1], h[3], 0), (h[2], h[5], 2), (h[0], h[1], 0),
                                  (h[1], h[2], 0)):
        want = rollup.totals_of(measure.utilisation(client, FLAVORS, start, end, OPTIONS))
        assert want, "the trace has allocations"
        assert rollup.utilisation_totals(client, FLAVORS, start, end, OPTIONS) == (want, raw_hours)
        # ... and the per-hour reader agrees with both.
        rows, _ = rollup.utilisation(client, FLAVORS, start, end, OPTIONS)
        assert rollup.totals_of(rows) == want
    # Not on whole hours: refused, as by the per-hour path (billing measures whole hours).
    odd = (h[0] + timedelta(minutes=30), h[2])
    for reader in (rollup.utilisation, rollup.utilisation_totals):
        with pytest.raises(MeteringInputError, match="whole hour"):
            reader(client, FLAVORS, *odd, OPTIONS)


# Minimums the run-piece reader serves (at least LONG_SLOTS slots: 40 min at 30 s) and one it does not.
MINIMUMS = (rollup.LONG_SLOTS * INTERVAL, 3600, 30 * 60)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_idle_runs_with_a_minimum_from_run_pieces_equal_the_raw_path(metrics, seed: int) -> None:  # type: ignore[no-untyped-def]
    """Reports with a minimum duration read recorded run pieces for whole hours (block masks for edge hours,
    raw samples for hours not rolled up): the same runs of at least the minimum as the raw path, across
    revs (hours rolled up alone, together, twice, later again over part of an earlier run), windows not on
    whole hours, one tenant, and a window where every hour is raw."""
    metrics.import_prometheus(_trace(seed))
    client = MetricsClient(metrics.url)
    h = [T0 + timedelta(hours=i) for i in range(HOURS + 1)]
    for a, b, now in ((0, 3, LATER), (3, 4, LATER), (3, 4, LATER), (1, 2, LATER + timedelta(minutes=1))):
        rollup.rollup_idle(client, h[a], h[b], OPTIONS, DEFAULT, now)
    windows = ((h[0], h[5]), (h[1], h[4]), (h[0] + timedelta(minutes=77, seconds=30), h[3] + timedelta(minutes=41)),
               (h[0] + timedelta(minutes=13), h[5] - timedelta(minutes=7, seconds=15)), (h[2], h[4]))
    long_runs = 0
    for minimum in MINIMUMS:
        for start, end in windows:
            want = _raw(client, start, end, DEFAULT, minimum)
            long_runs += len(want)
            got, raw_hours = _rolled(client, start, end, DEFAULT, min_seconds=minimum)
            assert got == want, (minimum, start, end)
            assert raw_hours == sum(1 for hour in rollup.hours(rollup.floor_hour(start), rollup.ceil_hour(end))
                                    if hour >= h[4])
        only = frozenset({"tenant-t1"})
        assert _rolled(client, T0, END, DEFAULT, min_seconds=minimum, namespaces=only)[0] == [
            r for r in _raw(client, T0, END, DEFAULT, minimum) if r[0] == "t1"]
    assert long_runs, "the trace has runs of at least the minimums"


def test_run_pieces_are_what_a_report_reads_for_whole_hours(metrics) -> None:  # type: ignore[no-untyped-def]
    """The piece reader really is used (a report reading masks for those hours would pass the test above
    too): with the pieces of one hour deleted from the TSDB, a report with a minimum loses that hour's
    runs, one without a minimum (masks) does not."""
    metrics.import_prometheus(_trace(3))
    client = MetricsClient(metrics.url)
    rollup.rollup_idle(client, T0, END, OPTIONS, DEFAULT, LATER)
    minimum = 3600
    want = _raw(client, T0, END, DEFAULT, minimum)
    assert want and _rolled(client, T0, END, DEFAULT, min_seconds=minimum) == (want, 0)
    fingerprint = rollup.idle_fingerprint(OPTIONS, DEFAULT)
    pieces = rollup._stored_pieces(client, fingerprint, rollup.coverage(client, rollup.IDLE, fingerprint, T0, END),
                                   OPTIONS)
    assert sum(len(v) for v in pieces.values()) < sum(
        1 for line in client.export_lines(f'{{__name__="{rollup.IDLE_METRIC}"}}', T0, END)
        for _ in __import__("json").loads(line)["values"]) / 2, "pieces are fewer than block masks and peaks"
    metrics._session.post(f"{metrics.url}/api/v1/admin/tsdb/delete_series",
                          data={"match[]": f'{{__name__="{rollup.IDLE_METRIC}", part="run"}}'},
                          timeout=60).raise_for_status()
    metrics._session.get(f"{metrics.url}/internal/resetRollupResultCache", timeout=10)
    assert _rolled(client, T0, END, DEFAULT, min_seconds=minimum) == ([], 0)
    assert _rolled(client, T0, END, DEFAULT)[0] == _raw(client, T0, END, DEFAULT)


def test_a_run_changing_signal_across_hours_keeps_the_profiling_signal(metrics) -> None:  # type: ignore[no-untyped-def]
    """One idle run over three hours: profiling metrics first, then only GPU_UTIL (an exporter restarted
    without profiling). Its pieces are rolled up hour by hour; joined, the run is one `profiling` run, as
    the raw path says (a slot of it was idle by the profiling signal)."""
    start, end = T0, T0 + timedelta(hours=4)
    tl = Timeline(start=start, end=end, interval=INTERVAL, phase=7)
    gpu = Gpu("GPU-SW", FLAVORS[0].model_name, index=7, holds=(Hold("tenant-sw", "pod-sw", start, end),))
    switch = start + timedelta(hours=1, minutes=30)
    metrics.import_prometheus(gpu_activity_lines(tl, gpu, (
        Activity(start, start + timedelta(minutes=40), engine=0.5, dram=0.5),
        Activity(start + timedelta(minutes=40), switch, engine=0.0, dram=0.0, fb_mib=512),
        Activity(switch, start + timedelta(hours=2, minutes=20), engine=None, dram=None, util=1.0, fb_mib=640),
        Activity(start + timedelta(hours=2, minutes=20), end, engine=None, dram=None, util=90.0))))
    client = MetricsClient(metrics.url)
    for hour in rollup.hours(start, end):
        rollup.rollup_idle(client, hour, hour + timedelta(hours=1), OPTIONS, DEFAULT, LATER)
    want = _raw(client, start, end, DEFAULT, 3600)
    assert [(r[7], r[11]) for r in want] == [("profiling", 100 * 60)]
    assert _rolled(client, start, end, DEFAULT, min_seconds=3600) == (want, 0)


@pytest.mark.parametrize("seed", [1, 2])
def test_blocks_straddling_hour_edges_at_a_60_s_scrape(metrics, seed: int) -> None:  # type: ignore[no-untyped-def]
    """At s = 60 a block is 40 minutes and straddles hour edges: each hour's part of it is recorded inside
    that hour, so hours rolled up by different runs, or next to raw hours, keep every slot (a block recorded
    at its end only was read with the rev of its first hour, and missed when only its first hour was read).
    The 30 s trace read on a 60 s grid: two samples per slot, still exact data for both paths."""
    metrics.import_prometheus(_trace(seed))
    client = MetricsClient(metrics.url)
    options = measure.Options(scrape_interval=60)
    assert not rollup.pieces_apply(options)
    rollup.rollup_idle(client, T0 + timedelta(hours=1), T0 + timedelta(hours=2), options, DEFAULT, LATER)
    rollup.rollup_idle(client, T0 + timedelta(hours=2), T0 + timedelta(hours=4), options, DEFAULT,
                       LATER + timedelta(minutes=1))
    for start, end in ((T0, END), (T0 + timedelta(hours=1), T0 + timedelta(hours=3)),
                       (T0 + timedelta(minutes=70), T0 + timedelta(hours=3, minutes=20))):
        for minimum in (0, 3600):
            want = sorted(_key(r) for r in measure.idle_runs(client, FLAVORS, start, end, options, DEFAULT)
                          if r.idle_seconds >= minimum)
            runs, raw_hours = rollup.idle_runs(client, FLAVORS, start, end, options, DEFAULT, min_seconds=minimum)
            assert sorted(_key(r) for r in runs) == want, (start, end, minimum)
            assert raw_hours == sum(1 for h in rollup.hours(rollup.floor_hour(start), rollup.ceil_hour(end))
                                    if not T0 + timedelta(hours=1) <= h < T0 + timedelta(hours=4))


def test_a_superseded_rollup_is_not_read_where_it_no_longer_stands(metrics) -> None:  # type: ignore[no-untyped-def]
    """An hour rolled up early (not final) shows an idle GPU; samples arriving later in each slot show it
    busy; the hour is rolled up again (final). The early rev still holds its pieces and masks for that hour
    (the TSDB cannot delete them): a report must take the final rev's for that hour only, also where the
    early rev covered more hours than the one superseded."""
    hour = T0 + timedelta(hours=1)
    start, end = T0, T0 + timedelta(hours=3)
    gpu = Gpu("GPU-LB", FLAVORS[0].model_name, index=9, holds=(Hold("tenant-lb", "pod-lb", start, end),))
    metrics.import_prometheus(gpu_activity_lines(Timeline(start=start, end=end, interval=INTERVAL, phase=7), gpu,
                                                 (Activity(start, end, engine=0.0, dram=0.0, fb_mib=256),)))
    client = MetricsClient(metrics.url)
    rollup.rollup_idle(client, T0, hour, OPTIONS, DEFAULT, LATER)
    early = hour + timedelta(hours=1, minutes=30)  # settled, not final: rolls up hours 1 and 2 (rev E)
    assert rollup.rollup_idle(client, hour, end, OPTIONS, DEFAULT, early) == 1
    rollup.rollup_idle(client, hour + timedelta(hours=1), end, OPTIONS, DEFAULT, LATER)
    # Later samples in every slot of hour 1 (20 s into it, after the 7 s ones): busy.
    metrics.import_prometheus(gpu_activity_lines(Timeline(start=hour, end=hour + timedelta(hours=1),
                                                          interval=INTERVAL, phase=20), gpu,
                                                 (Activity(hour, hour + timedelta(hours=1), engine=0.9, dram=0.9),)))
    rollup.rollup_idle(client, hour, hour + timedelta(hours=1), OPTIONS, DEFAULT, LATER + timedelta(minutes=1))
    for minimum in (0, 3600):
        want = _raw(client, start, end, DEFAULT, minimum)
        assert [(r[8], r[9]) for r in want] == [(start, hour), (hour + timedelta(hours=1), end)]
        assert _rolled(client, start, end, DEFAULT, min_seconds=minimum) == (want, 0)
