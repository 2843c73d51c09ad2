"""Billing benchmark: a month of a 1,000-GPU fleet in a real VictoriaMetrics, collected and invoiced.

One command: `.venv/bin/python benchmarks/billing.py` (or `make bench`). It creates its own database
(`gpufleet_bench_billing` on 127.0.0.1:5432, dropped and re-created each run; BENCH_BILLING_DATABASE_URL
overrides), starts `/usr/bin/victoria-metrics` on a free loopback port with a temporary storage
directory, and imports (not timed) 30 days of 30-second samples (96.5 million) shaped like dcgm-exporter
and the HAMi scheduler for:

* 700 whole H100s and 200 MIG 3g.40gb instances (on 100 A100s): each runs a job of 23 hours for one of
  200 tenants, then stays idle for an hour (reported without pod labels), over and over; the job
  boundaries are staggered per GPU;
* 100 HAMi containers on 25 shared A100s (20 GiB of 80 GiB, 25 % cores: a 0.25 share each).

Timed: `billing.collect.collect(month)` (the measurement inside VictoriaMetrics plus storing 323,400
hourly usage rows) and `billing.actions.draft_all(month)` (200 invoices). Targets on 2 cores (issue 14):
<= 10 s in all, >= 80 % of it waiting for the TSDB, drafting <= 0.5 s. It prints the figures, the load
average, the share of time with a TSDB query in flight, the process's CPU seconds, and checks that the
collected seconds equal the seconds of the generated timeline exactly, per cluster and mode. Exits 1 when
a check fails.

Options: --days N (default 30), --interval S (scrape interval, 30), --clusters N (spread the fleet over
N clusters, 1-3, in one VictoriaMetrics told apart by their `cluster` external label; every tenant is
placed on each), --data-dir DIR (keep VictoriaMetrics' storage there and reuse the import next time),
--profile FILE (cProfile of the timed part), --keep (leave the database for inspection).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import sys
import tempfile
import threading
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "platform")]

TARGET_S = 10.0  # collect + draft, the whole month
TARGET_SHARE = 0.80  # of it, at least this much waiting for the TSDB
TARGET_DRAFT_S = 0.5  # drafting 200 invoices
INTERVAL = 30
PHASE = 7
TENANTS = 200
WHOLE, MIG_GPUS, MIG_PER_GPU, HAMI_GPUS, HAMI_PER_GPU = 700, 100, 2, 25, 4
JOB_H, IDLE_H = 23, 1
H100, A100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100 80GB PCIe"
GIB = 1024**3
START = datetime(2025, 9, 1, tzinfo=UTC)  # September: 30 days
# --clusters 3: the upgraded installation's `default` plus two more, sharing one VictoriaMetrics and told
# apart by their vmagents' `cluster` external label: (name, label, region, region name, zones).
CLUSTERS = [("default", "eu-train", "eu-west-1", "Europe (Ireland)", []),
            ("inference", "us-infer", "us-east-1", "US East (N. Virginia)", ["us-east-1a"]),
            ("dev", "eu-dev", "eu-central-1", "Europe (Frankfurt)", ["eu-central-1a", "eu-central-1b"])]


def _set_interval(seconds: int) -> None:
    global INTERVAL
    INTERVAL = seconds


def _database_url() -> str:
    return os.environ.get("BENCH_BILLING_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/gpufleet_bench_billing")


def _recreate_database(url: str) -> None:
    import psycopg

    name = url.rsplit("/", 1)[1]
    with psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def _drop_database(url: str) -> None:
    import psycopg

    with psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{url.rsplit("/", 1)[1]}" WITH (FORCE)')


def _setup_django(url: str, metrics_url: str) -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "gpufleet.settings.test"
    os.environ["DATABASE_URL"] = url
    import django
    from django.conf import settings

    django.setup()
    settings.GPUFLEET_METRICS_URL = metrics_url
    settings.GPUFLEET_SCRAPE_INTERVAL = str(INTERVAL)
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)


# --- the generated month ----------------------------------------------------------------------------

def _ms_range(start: int, end: int) -> list[int]:
    """Scrape instants (ms) in [start, end) on the 60 s grid with the scraper's phase."""
    first = start + ((PHASE - start) % INTERVAL)
    return list(range(first * 1000, end * 1000, INTERVAL * 1000))


def _jobs(gpu: int, begin: int, end: int) -> list[tuple[int, int, str]]:
    """(start, end, tenant) holds of one GPU: 23 h jobs, 1 h idle, staggered by the GPU's number."""
    period = (JOB_H + IDLE_H) * 3600
    out, t, job = [], begin - (gpu % 24) * 3600, 0
    while t < end:
        s, e = max(t, begin), min(t + JOB_H * 3600, end)
        if s < e:
            out.append((s, e, f"t{(gpu * 7 + job) % TENANTS:03d}"))
        t, job = t + period, job + 1
    return out


def _line(labels: dict[str, str], values: list[int] | str, stamps: list[int]) -> str:
    vals = values if isinstance(values, str) else json.dumps(values)
    return f'{{"metric":{json.dumps(labels)},"values":{vals},"timestamps":{json.dumps(stamps)}}}'


def _const(value: int, n: int) -> str:
    return "[" + ",".join([str(value)] * n) + "]"


def _cluster(number: int, clusters: int) -> tuple[str, dict[str, str]]:
    """The cluster a GPU is in, and the external label its vmagent adds (none with a single cluster)."""
    if clusters == 1:
        return "default", {}
    name, label = CLUSTERS[number % clusters][:2]
    return name, {"cluster": label}


def generate(begin: int, end: int, clusters: int = 1):
    """Yield VictoriaMetrics JSON-lines import records; return totals via the `expected` dict,
    keyed "<cluster>/<mode>"."""
    expected: dict[str, Decimal] = defaultdict(Decimal)
    samples = 0

    def dcgm(index: int, uuid: str, model: str, host: str, mig: tuple[str, str] | None, mode: str, where: int):
        nonlocal samples
        cluster, external = _cluster(where, clusters)
        base = {"__name__": "DCGM_FI_DEV_FB_USED", "gpu": str(index % 8), "UUID": uuid,
                "device": f"nvidia{index % 8}", "modelName": model}
        if mig:
            base |= {"GPU_I_PROFILE": mig[0], "GPU_I_ID": mig[1]}
        base |= {"Hostname": host, "DCGM_FI_DRIVER_VERSION": "570.124.06", "instance": f"{host}:9400",
                 "job": "dcgm-exporter"} | external
        idle: list[int] = []
        cursor = begin
        for s, e, tenant in _jobs(index, begin, end):
            idle += _ms_range(cursor, s)
            stamps = _ms_range(s, e)
            samples += len(stamps)
            expected[f"{cluster}/{mode}"] += Decimal(len(stamps) * INTERVAL)
            yield _line(base | {"container": "main", "namespace": f"tenant-{tenant}", "pod": f"job-{uuid}-{s}"},
                        _const(30211, len(stamps)), stamps)
            cursor = e
        idle += _ms_range(cursor, end)
        if idle:
            samples += len(idle)
            yield _line(base, _const(0, len(idle)), idle)

    for i in range(WHOLE):
        yield from dcgm(i, f"GPU-w{i:04d}", H100, f"h100-node-{i // 8:03d}", None, "whole", i)
    for g in range(MIG_GPUS):
        for k in range(MIG_PER_GPU):
            n = WHOLE + g * MIG_PER_GPU + k
            yield from dcgm(n, f"GPU-m{g:04d}", A100, f"a100-node-{g // 4:03d}", ("3g.40gb", str(k + 1)), "mig",
                            g)
    everything = _ms_range(begin, end)
    for g in range(HAMI_GPUS):
        uuid, node = f"GPU-h{g:04d}", f"hami-node-{g // 4:03d}"
        cluster, external = _cluster(g, clusters)
        device = {"node": node, "device_uuid": uuid, "device_index": str(g % 4),
                  "device_type": f"NVIDIA-{A100}", "instance": "10.0.0.9:31993", "job": "hami-scheduler"} | external
        samples += len(everything)
        yield _line({"__name__": "hami_gpu_memory_limit_bytes"} | device, _const(80 * GIB, len(everything)),
                    everything)
        for c in range(HAMI_PER_GPU):
            n = 10_000 + g * HAMI_PER_GPU + c
            for s, e, tenant in _jobs(n, begin, end):
                stamps = _ms_range(s, e)
                samples += 2 * len(stamps)
                expected[f"{cluster}/hami"] += Decimal(len(stamps) * INTERVAL) * Decimal("0.25")
                labels = {"namespace": f"tenant-{tenant}", "node": node, "pod": f"share-{n}-{s}",
                          "container_index": "0", "device_uuid": uuid, "instance": "10.0.0.9:31993",
                          "job": "hami-scheduler"} | external
                yield _line({"__name__": "hami_vgpu_memory_allocated_bytes"} | labels,
                            _const(20 * GIB, len(stamps)), stamps)
                yield _line({"__name__": "hami_vgpu_core_allocated_ratio"} | labels, _const(25, len(stamps)), stamps)
    generate.samples = samples  # type: ignore[attr-defined]
    generate.expected = expected  # type: ignore[attr-defined]


def import_month(url: str, begin: int, end: int, clusters: int = 1) -> tuple[int, float]:
    from tests.support.victoriametrics import import_json_lines

    started = time.perf_counter()
    import_json_lines(url, generate(begin, end, clusters))
    return generate.samples, time.perf_counter() - started  # type: ignore[attr-defined]


# --- the timed part ---------------------------------------------------------------------------------

class TimedClient:
    """Wraps the metrics client to measure the wall time during which at least one TSDB query is in
    flight (queries of several days overlap; overlapping time is counted once)."""

    def __init__(self, client) -> None:  # type: ignore[no-untyped-def]
        self.client, self.seconds, self.calls = client, 0.0, 0
        self._lock = threading.Lock()
        self._running, self._since = 0, 0.0

    def range(self, query, start, end, step_seconds):  # type: ignore[no-untyped-def]
        with self._lock:
            if self._running == 0:
                self._since = time.perf_counter()
            self._running += 1
        try:
            return self.client.range(query, start, end, step_seconds)
        finally:
            with self._lock:
                self._running -= 1
                self.calls += 1
                if self._running == 0:
                    self.seconds += time.perf_counter() - self._since


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used (Linux /proc): less sensitive to the machine's load
    than wall time."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def seed_catalog(clusters: int = 1) -> None:
    from billing import actions
    from scheduling.models import Cluster, Flavor, GpuModel, Placement
    from tenants.models import Phase, Tenant

    h100 = GpuModel.objects.create(name="h100-80gb", dcgm_model_name=H100, memory_mib=81920)
    a100 = GpuModel.objects.create(name="a100-80gb-pcie", dcgm_model_name=A100, memory_mib=81920)
    Flavor.objects.create(name="h100", gpu_model=h100, mode="whole", weight=1, capacity=WHOLE)
    Flavor.objects.create(name="a100-3g", gpu_model=a100, mode="mig", mig_profile="3g.40gb", weight="0.4286",
                          capacity=MIG_GPUS * MIG_PER_GPU)
    Flavor.objects.create(name="a100-share", gpu_model=a100, mode="hami", memory_percent=25, cores_percent=25,
                          weight="0.25", capacity=HAMI_GPUS * HAMI_PER_GPU)
    tenants = Tenant.objects.bulk_create([Tenant(slug=f"t{i:03d}", display_name=f"tenant {i}",
                                                 trust_level="trusted", phase=Phase.READY) for i in range(TENANTS)])
    placed = []
    for number in range(clusters):
        name, label, region, region_name, zones = CLUSTERS[number]
        cluster, _ = Cluster.objects.update_or_create(name=name, defaults={
            "metrics_label": label if clusters > 1 else "", "region": region, "region_name": region_name,
            "zones": zones})
        # every tenant is placed on every cluster (home on the first): all the generated usage is billable
        placed += [Placement(tenant=t, cluster=cluster, home=number == 0) for t in tenants]
    Placement.objects.bulk_create(placed)
    for flavor, price in (("h100", "2.90"), ("a100-3g", "0.95"), ("a100-share", "0.60")):
        actions.set_price(flavor, price, "USD", "2025-01-01")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--interval", type=int, default=INTERVAL, help="scrape interval in seconds (30)")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="keep VictoriaMetrics' storage here and reuse an earlier import of the same month")
    parser.add_argument("--profile", type=Path, default=None, help="write a cProfile of the timed part here")
    parser.add_argument("--clusters", type=int, choices=(1, 2, 3), default=1,
                        help="spread the fleet over this many clusters in one VictoriaMetrics (cluster label)")
    args = parser.parse_args()
    _set_interval(args.interval)

    from tests.support.victoriametrics import VictoriaMetrics

    url = _database_url()
    _recreate_database(url)
    with tempfile.TemporaryDirectory(prefix="gpufleet-bench-billing-") as tmp:
        storage = args.data_dir or Path(tmp)
        vm = VictoriaMetrics.start(storage)
        try:
            _setup_django(url, vm.url)
            from django.db.models import Sum

            from billing import actions, collect
            from billing.models import UsageRecord
            from gpufleet.audit.context import acting

            seed_catalog(args.clusters)
            end = START + timedelta(days=args.days)
            marker = storage / f"imported-{args.days}d-{INTERVAL}s-{args.clusters}c.json"
            if args.data_dir and marker.exists():
                saved = json.loads(marker.read_text())
                samples, expected = saved["samples"], {k: Decimal(v) for k, v in saved["expected"].items()}
                print(f"reusing {samples:,} samples imported earlier into {storage}")
            else:
                samples, import_s = import_month(vm.url, int(START.timestamp()), int(end.timestamp()), args.clusters)
                expected = generate.expected  # type: ignore[attr-defined]
                marker.write_text(json.dumps({"samples": samples,
                                              "expected": {k: str(v) for k, v in expected.items()}}))
                print(f"imported {samples:,} samples in {import_s:.1f} s (not timed)")
            profiler = cProfile.Profile() if args.profile else None
            load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else "?"

            client = TimedClient(collect.metrics_client())
            from django.db import connection

            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                backend = cursor.fetchone()[0]
            vm_cpu, pg_cpu = _cpu_seconds(vm.process.pid), _cpu_seconds(backend)
            with acting(task="benchmark"):
                if profiler:
                    profiler.enable()
                began, cpu_began = time.perf_counter(), time.process_time()
                run = collect.collect(START, end, client=client)
                collected = time.perf_counter()
                invoices = actions.draft_all("2025-09")
                done, cpu_done = time.perf_counter(), time.process_time()
                vm_cpu, pg_cpu = _cpu_seconds(vm.process.pid) - vm_cpu, _cpu_seconds(backend) - pg_cpu
                if profiler:
                    profiler.disable()
                    profiler.dump_stats(args.profile)

            collect_s, draft_s, total_s = collected - began, done - collected, done - began
            by_mode = {f"{row['cluster__name']}/{row['flavor__mode']}": row["u"] for row in UsageRecord.objects
                       .values("cluster__name", "flavor__mode").annotate(u=Sum("unit_seconds"))}
            exact = by_mode == expected
            share = client.seconds / total_s
            print(f"load average before the timed part: {load}")
            print(f"collect (month, {run.records:,} usage rows, {args.clusters} cluster(s)): {collect_s:.2f} s; "
                  f"TSDB queries in flight {client.seconds:.2f} s ({client.calls} calls, measured three days at a "
                  f"time, the last three a day each, while the rows of earlier days are written); outside the TSDB "
                  f"{collect_s - client.seconds:.2f} s")
            print(f"draft {len(invoices)} invoices: {draft_s:.2f} s (target <= {TARGET_DRAFT_S} s) "
                  f"{'PASS' if draft_s <= TARGET_DRAFT_S else 'FAIL'}")
            python_cpu = cpu_done - cpu_began
            print(f"CPU seconds: VictoriaMetrics {vm_cpu:.2f}, Python (all threads of this process) "
                  f"{python_cpu:.2f}, PostgreSQL backend {pg_cpu:.2f}; VictoriaMetrics' share "
                  f"{vm_cpu / (vm_cpu + python_cpu + pg_cpu):.0%}")
            print(f"total: {total_s:.2f} s (target <= {TARGET_S:.0f} s) "
                  f"{'PASS' if total_s <= TARGET_S else 'FAIL'}; ratio to target {total_s / TARGET_S:.2f}")
            print(f"share of time inside the TSDB: {share:.0%} (target >= {TARGET_SHARE:.0%}) "
                  f"{'PASS' if share >= TARGET_SHARE else 'FAIL'}")
            for key in sorted(expected):
                print(f"  {key:<18} unit-seconds collected {by_mode.get(key, 0)} expected {expected[key]}")
            print(f"exact: {'PASS' if exact else 'FAIL'}")
            ok = (exact and total_s <= TARGET_S and share >= TARGET_SHARE and draft_s <= TARGET_DRAFT_S
                  and len(invoices) == TENANTS)
        finally:
            vm.stop()
            from django.db import connections

            connections.close_all()
            if not args.keep:
                _drop_database(url)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
