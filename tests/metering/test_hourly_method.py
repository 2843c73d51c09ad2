"""The hourly method (MetricsQL rollups per series-hour, per-slot only where they cannot decide) gives
exactly the per-slot method's numbers, in the real VictoriaMetrics, on randomised traces: missed runs of
every length around N (N - 1 .. N + 2), placed on and across hour edges; replicas with their own gaps,
phases and jitter (two samples in one slot, empty slots between samples); restarts (a new pod right after
the old one, or the same pod back after a gap); MIG instances; old label names; HAMi-managed GPUs that
dcgm-exporter also attributes, for part of the window; several clusters in one TSDB; scrape intervals of
15, 30 and 60 s. The per-slot method is the reference (it is itself checked against a brute-force model
in test_usage_crosscheck.py)."""

from __future__ import annotations

import random
from datetime import datetime
from decimal import Decimal

import pytest

from billing.metering.usage import ClusterSource, FlavorSpec, measure_report
from tests.metering.helpers import A100, GIB, H100, at

pytestmark = pytest.mark.service

FLAVORS = (
    FlavorSpec("h100", "whole", H100, Decimal(1)),
    FlavorSpec("a100-3g", "mig", A100, Decimal("0.4286"), mig_profile="3g.40gb"),
    FlavorSpec("a100-1g", "mig", A100, Decimal("0.1429"), mig_profile="1g.10gb"),
    FlavorSpec("a100-share", "hami", A100, Decimal("0.25")),
)
NAMESPACES = ("tenant-a", "tenant-b", "tenant-c", "kube-system")
CLUSTERS = (ClusterSource("train", "eu-train"), ClusterSource("infer", "us-infer"), ClusterSource("dev", "eu-dev"))
METRIC = "DCGM_FI_DEV_FB_USED"
HOURS = 5  # traces cover [08:00, 13:00); measured [09:00, 12:00) and [08:00, 13:00)


def _labels(pairs: dict[str, str]) -> str:
    return ",".join(f'{k}="{v}"' for k, v in pairs.items())


def _missed(rng: random.Random, slots: int, n: int, per_hour: int) -> set[int]:
    """Scrape indexes a replica misses: runs of N - 1 .. N + 2 (and sometimes 1 or many), half of them
    placed so that they touch or straddle an hour edge."""
    missed: set[int] = set()
    for _ in range(rng.randint(0, 4)):
        length = max(1, rng.choice((n - 1, n, n + 1, n + 2, 1, rng.randint(1, 3 * per_hour // 2))))
        if rng.random() < 0.5:
            edge = per_hour * rng.randint(1, HOURS - 1)
            first = edge - rng.randint(0, length + 1)
        else:
            first = rng.randrange(slots)
        missed.update(range(first, first + length))
    return missed


def _trace(seed: int, year: int, interval: int, n: int, clusters: bool, month: int = 5,
           old_names: float = 0.3) -> list[str]:
    rng = random.Random(seed)
    begin = int(at(year, month, 1, 8).timestamp())
    per_hour = 3600 // interval
    slots = HOURS * per_hour
    out: list[str] = []
    devices = [(H100, "", "")] * 5 + [(A100, "3g.40gb", "1"), (A100, "1g.10gb", "7"), (A100, "1g.10gb", "8")]
    hami_uuids = [f"GPU-{seed}-h{d}" for d in range(2)]
    for number, (model, profile, mig_id) in enumerate(devices + [(A100, "", "")] * 2):
        uuid = hami_uuids[number - len(devices)] if number >= len(devices) else f"GPU-{seed}-{number}"
        old = rng.random() < old_names
        cluster = {"cluster": rng.choice(CLUSTERS).label} if clusters else {}
        # who holds the device at each scrape index: holds of random length, restarts and idle gaps
        holder: list[tuple[str, str] | None] = []
        while len(holder) < slots:
            namespace, pod = rng.choice(NAMESPACES), f"pod-{rng.randrange(10**6)}"
            for _ in range(rng.choice((1, 1, 2))):  # the same pod back after a gap: a restart
                holder += [(namespace, pod)] * rng.randint(2, 2 * per_hour)
                holder += [None] * rng.choice((0, 0, n, n + 1, rng.randint(1, per_hour)))
        replicas = [{"instance": "a", "job": "dcgm"}]
        if rng.random() < 0.5:
            replicas.append({"instance": "a", "prometheus_replica": "r1"})
        for replica in replicas:
            phase = rng.randrange(interval)
            jitter = rng.random() < 0.25
            missed = _missed(rng, slots, n, per_hour)
            for i in range(slots):
                if i in missed:
                    continue
                stamp = (begin + phase + i * interval) * 1000
                if jitter:
                    stamp += rng.randint(-2500, 2500)
                who = holder[i]
                labels = {"gpu": str(number % 8), "uuid" if old else "UUID": uuid, "modelName": model}
                if profile:
                    labels |= {"GPU_I_PROFILE": profile, "GPU_I_ID": mig_id}
                labels |= {"Hostname": f"node-{number // 4}"}
                if who is not None:
                    names = ("pod_namespace", "pod_name", "container_name") if old else (
                        "namespace", "pod", "container")
                    labels |= dict(zip(names, (*who, "main"), strict=True))
                labels |= replica | cluster
                out.append(f"{METRIC}{{{_labels(labels)}}} {30211 if who else 0} {stamp}")
        if number >= len(devices):
            # HAMi manages this GPU for a stretch of the window (dcgm-exporter attributes it throughout)
            first, last = sorted(rng.sample(range(slots), 2))
            device = {"node": "hami-node", "device_uuid": uuid, "device_type": f"NVIDIA-{A100}"} | cluster
            for i in range(first, last):
                stamp = (begin + 7 + i * interval) * 1000
                out.append(f"hami_gpu_memory_limit_bytes{{{_labels(device)}}} {80 * GIB} {stamp}")
                if i % (2 * per_hour) < per_hour:
                    share = {"namespace": "tenant-a", "node": "hami-node", "pod": "share", "container_index": "0",
                             "device_uuid": uuid} | cluster
                    out.append(f"hami_vgpu_memory_allocated_bytes{{{_labels(share)}}} {20 * GIB} {stamp}")
                    out.append(f"hami_vgpu_core_allocated_ratio{{{_labels(share)}}} 25 {stamp}")
    return out


def _both(metrics, start: datetime, end: datetime, **kwargs):
    hourly = measure_report(metrics, FLAVORS, start, end, method="hourly", **kwargs)
    per_slot = measure_report(metrics, FLAVORS, start, end, method="per-slot", **kwargs)
    return hourly, per_slot


# (seed, scrape interval, N, several clusters, share of devices with old label names). One test and one
# year for all (a month each): the shared VictoriaMetrics hands every test its own year, counting down
# from 2025, and it stores nothing before 1970. The last two have no old label names, so the queries
# leave that branch out (`QuerySettings.old_label_names`).
CASES = [(1, 30, 3, False, 0.3), (2, 30, 3, True, 0.3), (3, 30, 0, False, 0.3), (4, 30, 1, True, 0.3),
         (5, 30, 2, False, 0.3), (6, 60, 3, True, 0.3), (7, 15, 4, False, 0.3), (8, 30, 5, True, 0.3),
         (9, 60, 1, False, 0.3), (10, 30, 3, True, 0.3), (11, 30, 3, False, 0.0), (12, 15, 1, True, 0.0)]


def test_hourly_method_equals_per_slot_method(victoria, metrics, year):
    for month, (seed, interval, max_gap, clusters, old_names) in enumerate(CASES, start=1):
        victoria.import_prometheus(_trace(seed, year, interval, max_gap, clusters, month, old_names))
        kwargs = dict(scrape_interval=interval, max_gap_scrapes=max_gap)
        if clusters:
            kwargs["clusters"] = CLUSTERS
        for start, end in ((at(year, month, 1, 9), at(year, month, 1, 12)),
                           (at(year, month, 1, 8), at(year, month, 1, 13))):
            hourly, per_slot = _both(metrics, start, end, **kwargs)
            assert hourly.samples == per_slot.samples, (seed, start)
            assert hourly.unmatched == per_slot.unmatched, (seed, start)
            assert len(per_slot.samples) >= 10  # the trace really exercised something
            # and some series-hours really went through the per-slot remainder
            assert hourly.dcgm_per_slot_queries > 0
        # several days per DCGM query (as the collector asks): the same numbers
        start, end = at(year, month, 1, 8), at(year, month, 1, 13)
        long_chunks = measure_report(metrics, FLAVORS, start, end, chunk_hours=2, hourly_chunk_hours=72, **kwargs)
        assert long_chunks.samples == _both(metrics, start, end, **kwargs)[1].samples, seed


STEADY = {  # (GPU, tenant, scrape phase, replicas): missed scrape indexes per replica (120 a hour)
    ("GPU-0", "a", 7, ("r0", "r1")): ({100, 101, 102, 103, 104, 105, 240, 241}, {240, 241}),  # 10:00 head
    ("GPU-1", "b", 29, ("r0",)): ({358, 359},),  # the end of 10:00-11:00, bridged to 11:00:29
    ("GPU-2", "c", 0, ("r0",)): ({119, 120},),  # one slot either side of 09:00
}


def _steady(begin: int, gpus: dict) -> list[str]:
    raw = []
    for (uuid, tenant, phase, replicas), missed in gpus.items():
        for replica, skip in zip(replicas, missed, strict=True):
            raw += [f'{METRIC}{{UUID="{uuid}",modelName="{H100}",namespace="tenant-{tenant}",pod="p-{tenant}",'
                    f'prometheus_replica="{replica}"}} 1 {(begin + phase + i * 30) * 1000}'
                    for i in range(4 * 120) if i not in skip]
    return raw


def test_a_steady_fleet_needs_no_per_slot_query(victoria, metrics, year):
    """Contiguous runs, bridged gaps at the start, at the end and across an hour edge, and a replica whose
    gap the other replica covers: every series-hour is decided by the rollups, none by the per-slot query
    (4 queries: the HAMi-managed list, the group totals, the replica-aware rollups for the group-hours of
    the replica pair, HAMi), and the numbers are the per-slot method's."""
    victoria.import_prometheus(_steady(int(at(year, 5, 1, 8).timestamp()), STEADY))
    hourly, per_slot = _both(metrics, at(year, 5, 1, 8), at(year, 5, 1, 12))
    assert hourly.samples == per_slot.samples
    assert hourly.queries == 4 and hourly.dcgm_per_slot_queries == 0
    assert {s.tenant_slug for s in hourly.samples} == {"a", "b", "c"}
    assert all(s.unit_seconds == 3600 for s in hourly.samples)  # every gap bridged (N = 3)


def test_one_steady_series_per_gpu_is_decided_by_the_group_totals(victoria, metrics, year):
    """Without replicas the group totals alone decide every series-hour (3 queries: the HAMi-managed list,
    the group totals, HAMi), bridged gaps at an hour edge included."""
    single = {key: gaps for key, gaps in STEADY.items() if len(key[3]) == 1}
    victoria.import_prometheus(_steady(int(at(year, 5, 1, 8).timestamp()), single))
    asked: list[str] = []

    class Recording:
        def range(self, query, start, end, step):  # type: ignore[no-untyped-def]
            asked.append(query)
            return metrics.range(query, start, end, step)

    hourly = measure_report(Recording(), FLAVORS, at(year, 5, 1, 8), at(year, 5, 1, 12), method="hourly")
    per_slot = measure_report(metrics, FLAVORS, at(year, 5, 1, 8), at(year, 5, 1, 12), method="per-slot")
    assert hourly.samples == per_slot.samples
    assert hourly.queries == 3 and hourly.dcgm_per_slot_queries == 0
    # no series has the old label names, so only the probe asks for them
    assert [q for q in asked if 'pod_name!=""' in q] == asked[:1]
    assert {s.tenant_slug for s in hourly.samples} == {"b", "c"}
    assert all(s.unit_seconds == 3600 for s in hourly.samples)
