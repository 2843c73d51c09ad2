"""Exact GPU-seconds measured by the real VictoriaMetrics from exporter-shaped series.

Every expected number is worked out by hand from the timeline (30 s scrapes, 7 s phase): a hold
[start, end) has one sample per 30 s and is worth end - start seconds unless scrapes are missed.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from tests.metering.helpers import A100, GIB, H100, at, load, run, table, units
from tests.support.dcgm_series import IDLE_EMPTY, Gpu, HamiGpu, HamiShare, Hold, Timeline

pytestmark = pytest.mark.service

D = Decimal


def test_whole_gpus_exact_seconds(victoria, metrics, year):
    t = Timeline(at(year, 3, 1, 9), at(year, 3, 1, 12))
    t.gpus = [
        Gpu("GPU-w0", H100, (Hold("tenant-acme", "train-0", at(year, 3, 1, 10), at(year, 3, 1, 10, 5)),)),
        Gpu("GPU-w1", H100, (Hold("tenant-acme", "train-1", at(year, 3, 1, 10), at(year, 3, 1, 10, 20)),), index=1),
        Gpu("GPU-w2", H100, (Hold("tenant-beta", "infer-0", at(year, 3, 1, 9, 30), at(year, 3, 1, 10, 30)),),
            index=2),
    ]
    load(victoria, t)
    got = table(run(metrics, at(year, 3, 1, 9), at(year, 3, 1, 12)))
    assert got == {
        ("acme", "h100", 10): (D("1500.000"), D("1500.000")),  # 300 + 1200
        ("beta", "h100", 9): (D("1800.000"), D("1800.000")),
        ("beta", "h100", 10): (D("1800.000"), D("1800.000")),
    }


def test_mig_instances_by_profile(victoria, metrics, year):
    t = Timeline(at(year, 3, 1, 9), at(year, 3, 1, 12))
    day = (year, 3, 1)
    t.gpus = [
        Gpu("GPU-m", A100, (Hold("tenant-acme", "job-a", at(*day, 10), at(*day, 10, 20)),),
            mig_profile="3g.40gb", mig_id="1"),
        Gpu("GPU-m", A100, (), mig_profile="3g.40gb", mig_id="2"),  # idle instance, no pod labels
        Gpu("GPU-n", A100, (Hold("tenant-beta", "job-b", at(*day, 10, 10), at(*day, 10, 40)),), index=1,
            mig_profile="1g.10gb", mig_id="7"),
        Gpu("GPU-n", A100, (Hold("tenant-beta", "job-c", at(*day, 10, 10), at(*day, 10, 40)),), index=1,
            mig_profile="1g.10gb", mig_id="8"),
    ]
    load(victoria, t)
    got = table(run(metrics, at(*day, 9), at(*day, 12)))
    assert got == {
        ("acme", "a100-3g", 10): (D("1200.000"), D("514.320")),  # 1200 x 0.4286
        ("beta", "a100-1g", 10): (D("3600.000"), D("514.440")),  # 2 instances x 1800, x 0.1429
    }


def test_hami_shares_and_no_double_billing(victoria, metrics, year):
    day = (year, 3, 2)
    t = Timeline(at(*day, 9), at(*day, 12))
    t.hami = [HamiGpu("GPU-h", f"NVIDIA-{A100}", 80 * GIB, (
        # max(20/80 memory, 10% cores) = 0.25 for one hour
        HamiShare("tenant-acme", "share-a", at(*day, 10), at(*day, 11), 20 * GIB, 10),
        # max(8/80 memory, 50% cores) = 0.5 for 30 minutes
        HamiShare("tenant-beta", "share-b", at(*day, 10), at(*day, 10, 30), 8 * GIB, 50, container_index=1),
    ))]
    # dcgm-exporter may attribute the shared device to a pod: it must not be billed as a whole A100.
    t.gpus = [Gpu("GPU-h", A100, (Hold("tenant-acme", "share-a", at(*day, 10), at(*day, 11)),))]
    load(victoria, t)
    got = table(run(metrics, at(*day, 9), at(*day, 12)))
    assert got == {
        ("acme", "a100-share", 10): (D("900.000"), D("900.000")),
        ("beta", "a100-share", 10): (D("900.000"), D("900.000")),
    }
    by_memory = units(run(metrics, at(*day, 9), at(*day, 12), share_rule="memory"))
    assert by_memory == {("acme", "a100-share", 10): D("900.000"), ("beta", "a100-share", 10): D("180.000")}
    by_cores = units(run(metrics, at(*day, 9), at(*day, 12), share_rule="cores"))
    assert by_cores == {("acme", "a100-share", 10): D("360.000"), ("beta", "a100-share", 10): D("900.000")}


def test_pod_restart_on_same_gpu(victoria, metrics, year):
    day = (year, 3, 3)
    t = Timeline(at(*day, 9), at(*day, 12))
    t.gpus = [
        Gpu("GPU-r0", H100, (Hold("tenant-acme", "train-abc", at(*day, 10), at(*day, 10, 10)),
                             Hold("tenant-acme", "train-def", at(*day, 10, 10), at(*day, 10, 20)))),
        # restarted after a two-minute pause: the pause is not held
        Gpu("GPU-r1", H100, (Hold("tenant-beta", "srv-1", at(*day, 10), at(*day, 10, 10)),
                             Hold("tenant-beta", "srv-2", at(*day, 10, 12), at(*day, 10, 20))), index=1),
    ]
    load(victoria, t)
    assert units(run(metrics, at(*day, 9), at(*day, 12))) == {
        ("acme", "h100", 10): D("1200.000"),
        ("beta", "h100", 10): D("1080.000"),  # 600 + 480
    }


def test_hour_and_month_boundaries_and_split_windows(victoria, metrics, year):
    t = Timeline(at(year, 1, 31, 20), at(year, 2, 1, 3))
    t.gpus = [
        Gpu("GPU-b0", H100, (Hold("tenant-acme", "p", at(year, 1, 31, 21, 50), at(year, 1, 31, 22, 20)),)),
        Gpu("GPU-b1", H100, (Hold("tenant-acme", "q", at(year, 1, 31, 23, 30), at(year, 2, 1, 0, 30)),), index=1),
    ]
    load(victoria, t)
    whole = run(metrics, at(year, 1, 31, 20), at(year, 2, 1, 3))
    expected = {(at(year, 1, 31, 21), D(600)), (at(year, 1, 31, 22), D(1200)),
                (at(year, 1, 31, 23), D(1800)), (at(year, 2, 1, 0), D(1800))}
    assert {(s.hour_start, s.unit_seconds) for s in whole.samples} == expected
    january = run(metrics, at(year, 1, 31, 0), at(year, 2, 1, 0), chunk_hours=5)
    february = run(metrics, at(year, 2, 1, 0), at(year, 2, 2, 0))
    assert january.samples + february.samples == whole.samples
    assert run(metrics, at(year, 1, 31, 20), at(year, 2, 1, 3)).samples == whole.samples  # idempotent


@pytest.mark.parametrize("phase", [0, 1, 7, 29])
@pytest.mark.parametrize("dialect", ["metricsql", "promql"])
def test_aligned_scrapes_bill_nothing_to_the_previous_month(victoria, metrics, year, phase, dialect):
    """A gauge sample at t holds from t until the next one: it belongs to [t, t + s). A job whose first
    scrape is at 00:00:00 on the 1st (phase 0, aligned scrapes) bills 0 s to the previous month, and one
    whose last scrape is at 23:59:30 on the 31st bills 0 s to the next. Exact at every phase."""
    t = Timeline(at(year, 1, 31, 22), at(year, 2, 1, 2), phase=phase)
    t.gpus = [
        Gpu("GPU-a0", H100, (Hold("tenant-acme", "starts", at(year, 2, 1, 0), at(year, 2, 1, 0, 30)),)),
        Gpu("GPU-a1", H100, (Hold("tenant-beta", "ends", at(year, 1, 31, 23, 30), at(year, 2, 1, 0)),), index=1),
    ]
    load(victoria, t)
    january = run(metrics, at(year, 1, 31, 0), at(year, 2, 1, 0), dialect=dialect, max_gap_scrapes=3)
    february = run(metrics, at(year, 2, 1, 0), at(year, 2, 2, 0), dialect=dialect, max_gap_scrapes=3)
    assert {(s.tenant_slug, s.hour_start, s.unit_seconds) for s in january.samples} == {
        ("beta", at(year, 1, 31, 23), D(1800))}
    assert {(s.tenant_slug, s.hour_start, s.unit_seconds) for s in february.samples} == {
        ("acme", at(year, 2, 1, 0), D(1800))}


@pytest.mark.parametrize("dialect", ["metricsql", "promql"])
def test_missed_scrapes_are_bridged_up_to_the_limit(victoria, metrics, year, dialect):
    day = (year, 3, 4)
    ten, ten10 = at(*day, 10), at(*day, 10, 10)  # 20 samples, indexes 0..19
    t = Timeline(at(*day, 9), at(*day, 12))
    t.gpus = [
        Gpu("GPU-g1", H100, (Hold("tenant-one", "p", ten, ten10, missed=frozenset({5})),)),
        Gpu("GPU-g3", H100, (Hold("tenant-three", "p", ten, ten10, missed=frozenset({5, 6, 7})),), index=1),
        Gpu("GPU-g4", H100, (Hold("tenant-four", "p", ten, ten10, missed=frozenset({5, 6, 7, 8})),), index=2),
        Gpu("GPU-gl", H100, (Hold("tenant-last", "p", ten, ten10, missed=frozenset({19})),), index=3),
        # misses the two scrapes around 11:00 (10:59:37 and 11:00:07): each hour keeps its bridged slot
        Gpu("GPU-gh", H100, (Hold("tenant-hour", "p", at(*day, 10, 55), at(*day, 11, 5),
                                  missed=frozenset({9, 10})),), index=4),
    ]
    load(victoria, t)
    got = units(run(metrics, at(*day, 9), at(*day, 12), dialect=dialect))
    assert got == {
        ("one", "h100", 10): D(600),
        ("three", "h100", 10): D(600),
        ("four", "h100", 10): D(480),  # 4 missed > 3: two runs of 5 and 11 samples
        ("last", "h100", 10): D(570),  # nothing after the last sample to bridge to
        ("hour", "h100", 10): D(300),
        ("hour", "h100", 11): D(300),
    }
    strict = units(run(metrics, at(*day, 9), at(*day, 12), max_gap_scrapes=0, dialect=dialect))
    assert strict[("one", "h100", 10)] == D(570)
    assert strict[("hour", "h100", 10)] == D(270)
    assert strict[("hour", "h100", 11)] == D(270)


def test_replica_copies_count_once(victoria, metrics, year):
    day = (year, 3, 5)
    t = Timeline(at(*day, 9), at(*day, 12))
    replicas = ({"instance": "10.0.0.1:9400", "job": "dcgm", "prometheus_replica": "prom-0"},
                {"instance": "10.0.0.1:9400", "job": "dcgm", "prometheus_replica": "prom-1"},
                {"instance": "dcgm-exporter-x", "job": "gpu-metrics"})
    t.gpus = [Gpu("GPU-d", H100, (Hold("tenant-acme", "p", at(*day, 10), at(*day, 10, 5)),), replicas=replicas)]
    t.hami = [HamiGpu("GPU-dh", f"NVIDIA-{A100}", 80 * GIB,
                      (HamiShare("tenant-acme", "s", at(*day, 10), at(*day, 10, 20), 40 * GIB, 0),),
                      replicas=({"instance": "a"}, {"instance": "b"}))]
    load(victoria, t)
    assert units(run(metrics, at(*day, 9), at(*day, 12))) == {
        ("acme", "h100", 10): D(300), ("acme", "a100-share", 10): D(600)}


def test_unattributed_foreign_and_old_label_names(victoria, metrics, year):
    day = (year, 3, 6)
    hold = (at(*day, 10), at(*day, 10, 10))
    t = Timeline(at(*day, 9), at(*day, 12))
    t.gpus = [
        Gpu("GPU-i0", H100),  # idle, pod labels absent
        Gpu("GPU-i1", H100, index=1, idle=IDLE_EMPTY),  # idle, container="",namespace="",pod=""
        Gpu("GPU-i2", H100, index=2, idle=IDLE_EMPTY, old_label_names=True),
        Gpu("GPU-f0", H100, (Hold("kube-system", "p", *hold),), index=3),
        Gpu("GPU-f1", H100, (Hold("tenantx", "p", *hold),), index=4),
        Gpu("GPU-f2", H100, (Hold("tenant-", "p", *hold),), index=5),
        Gpu("GPU-f3", H100, (Hold("llm", "vllm-0", *hold),), index=6),
        # --use-old-namespace label names are attributed like the new ones
        Gpu("GPU-o0", H100, (Hold("tenant-old", "p", *hold),), index=7, old_label_names=True),
    ]
    load(victoria, t)
    report = run(metrics, at(*day, 9), at(*day, 12))
    assert units(report) == {("old", "h100", 10): D(600)}
    assert report.unmatched == []


def test_usage_without_a_flavor_is_reported_not_dropped(victoria, metrics, year):
    day = (year, 3, 7)
    t = Timeline(at(*day, 9), at(*day, 12))
    t.gpus = [Gpu("GPU-u", "NVIDIA L40S", (Hold("tenant-acme", "p", at(*day, 10), at(*day, 10, 1)),)),
              Gpu("GPU-v", A100, (Hold("tenant-acme", "p", at(*day, 10), at(*day, 10, 1)),),
                  mig_profile="2g.20gb", mig_id="3")]
    load(victoria, t)
    report = run(metrics, at(*day, 9), at(*day, 12))
    assert report.samples == []
    assert [(u.tenant_slug, u.mode, u.model_name, u.mig_profile, u.unit_seconds) for u in report.unmatched] == [
        ("acme", "mig", A100, "2g.20gb", D(60)), ("acme", "whole", "NVIDIA L40S", "", D(60))]


class Recording:
    """Wraps the client to see what crosses the wire: only aggregates, never raw samples."""

    def __init__(self, client):
        self.client, self.calls = client, []

    def range(self, query, start, end, step_seconds):
        result = self.client.range(query, start, end, step_seconds)
        self.calls.append((query, start, end, step_seconds, result))
        return result


@pytest.mark.parametrize("method", ["per-slot", "hourly"])
def test_only_hourly_aggregates_leave_the_tsdb(victoria, metrics, year, method):
    day = (year, 3, 8)
    t = Timeline(at(*day, 0), at(year, 3, 9, 0))
    t.gpus = [Gpu(f"GPU-a{i}", H100, (Hold(f"tenant-t{i % 3}", f"p{i}", at(*day, 1), at(*day, 22)),), index=i)
              for i in range(6)]
    load(victoria, t)
    recorder = Recording(metrics)
    report = run(recorder, at(*day, 0), at(year, 3, 9, 0), chunk_hours=12, method=method)
    if method == "per-slot":
        assert len(recorder.calls) == report.queries == 4  # 2 chunks x (DCGM, HAMi)
    else:  # 2 chunks x (the HAMi-managed GPUs near the chunk: one point per device, DCGM, HAMi)
        assert len(recorder.calls) == report.queries == 6
    for query, start, end, step, result in recorder.calls:
        if method == "hourly" and start == end:  # the list of HAMi-managed GPUs (none here)
            assert step == 3600 and result == []
            continue
        assert step == 3600 and (end - start).total_seconds() == 11 * 3600
        for series in result:
            assert set(series.labels) <= {"namespace", "modelName", "GPU_I_PROFILE", "device_type"}
            assert len(series.samples) <= 12
    assert sum(s.unit_seconds for s in report.samples) == 6 * 21 * 3600


@pytest.mark.parametrize(("jitter", "seconds"), [((0,), 600), ((-50, 50), 630), ((50, -50), 570)])
def test_scrapes_straddling_slot_boundaries_move_a_run_by_at_most_one_interval(victoria, metrics, year,
                                                                                jitter, seconds):
    """The documented limit: a scrape phase of 0 with ±50 ms jitter puts samples on both sides of slot
    boundaries. The skipped slots inside the run are bridged; only its ends can move, by one interval."""
    day = (year, 3, 9)
    t = Timeline(at(*day, 9), at(*day, 12), phase=0, jitter_ms=jitter)
    t.gpus = [Gpu("GPU-j", H100, (Hold("tenant-acme", "p", at(*day, 10), at(*day, 10, 10)),))]
    load(victoria, t)
    hours = run(metrics, at(*day, 9), at(*day, 12)).samples
    assert sum(s.unit_seconds for s in hours) == seconds
