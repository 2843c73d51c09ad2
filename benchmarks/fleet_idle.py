"""Fleet-operations benchmark: idle findings and utilisation for a month of 1,000 GPUs at a 30 s scrape.

One command: `.venv/bin/python benchmarks/fleet_idle.py`. It starts `/usr/bin/victoria-metrics` on a free
loopback port with a temporary storage directory and imports (not timed) 30 days of 30-second samples
shaped like dcgm-exporter for 1,000 allocations:

* 800 whole H100s with profiling metrics (GR_ENGINE_ACTIVE, DRAM_ACTIVE) and FB_USED,
* 100 whole H100s without profiling metrics (GPU_UTIL and FB_USED: the `gpu_util` fallback),
* 100 MIG 3g.40gb instances on 50 A100s (profiling metrics; MIG reports no GPU_UTIL).

Each runs jobs of 23 hours for one of 200 tenants, then stays unallocated for an hour (no pod labels),
staggered per GPU. Inside each job: busy, then idle for 90 minutes from hour 6 (a finding: memory is
still held), busy, then idle for 20 minutes from hour 12 (below the 60-minute minimum: not a finding),
busy again. Every 50th GPU misses one scrape inside each idle stretch (bridged, as billing bridges it).

Timed, in three phases (each prints wall seconds, seconds waiting for the TSDB, and CPU seconds of this
Python process and of VictoriaMetrics, from /proc):

1. the periodic task's cost: `--single-hours` (6) settled hours rolled up one at a time
   (`scheduling.fleetops.rollup.rollup_utilisation` + `rollup_idle`, per-slot work inside the TSDB, results
   recorded back into it);
2. the backfill of the rest of the window, a day per call (what `gpufleet fleet rollup` does);
3. the month report reading the roll-ups (`rollup.utilisation_totals`: per tenant x flavor, summed inside
   the TSDB; `rollup.idle_runs` with the 60-minute minimum: run pieces): the figure against the target,
   <= 10 s on 2 cores.

The report's numbers are checked exactly against the generated timeline (findings, idle seconds, allocated
seconds); `--raw` also times the raw report (`measure.utilisation` + `measure.idle_runs`, no roll-ups) and
checks that the totals and the runs of at least 60 minutes are equal, and (untimed) that the per-hour rows
and every run of any length read from the roll-ups are equal too. Exits 1 when a check fails, the target
is missed, or less than half of the month's computation in this run -- its roll-ups and the report reading
them -- is spent waiting for the TSDB. (The report alone is printed too, and is mostly Python: with the
per-slot work done in the roll-ups, what is left at report time is decoding and assembling the 30,000 findings
the answer consists of, ~1 CPU-s, against ~0.3-0.6 CPU-s of VictoriaMetrics reading them out; a report that is
mostly inside the TSDB is one that re-reads the raw samples, 100-300 s.) Options: --days N (default
30), --single-hours N, --raw, --report-repeats N, --data DIR (keep VictoriaMetrics' storage in DIR and
reuse it on the next run with the same --days: the untimed import of a month takes minutes; roll-ups
already final there are not redone).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "platform")]

TARGET_S = 10.0
INTERVAL = 30
PHASE = 7
TENANTS = 200
PROFILED, UTIL_ONLY, MIG = 800, 100, 100
JOB_H, GAP_H = 23, 1
IDLE = ((6 * 3600, 90 * 60), (12 * 3600, 20 * 60))  # (offset into the job, length): 90 min, 20 min
MIN_IDLE_S = 3600
H100, A100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100 80GB PCIe"
START = datetime(2025, 9, 1, tzinfo=UTC)


def _stamps(start: int, end: int) -> list[int]:
    first = start + ((PHASE - start) % INTERVAL)
    return list(range(first * 1000, end * 1000, INTERVAL * 1000))


def _jobs(gpu: int, begin: int, end: int) -> list[tuple[int, int, int, str]]:
    """(clipped start, clipped end, unclipped job start, tenant) of one GPU's jobs."""
    period = (JOB_H + GAP_H) * 3600
    out, t, job = [], begin - (gpu % 24) * 3600, 0
    while t < end:
        s, e = max(t, begin), min(t + JOB_H * 3600, end)
        if s < e:
            out.append((s, e, t, f"t{(gpu * 7 + job) % TENANTS:03d}"))
        t, job = t + period, job + 1
    return out


def _line(labels: dict[str, str], value: float, stamps: list[int]) -> str:
    return (f'{{"metric":{json.dumps(labels)},"values":[{",".join([repr(value)] * len(stamps))}],'
            f'"timestamps":{json.dumps(stamps)}}}')


class Expected:
    def __init__(self) -> None:
        self.findings = 0
        self.idle_seconds = 0
        self.allocated = Decimal(0)
        self.samples = 0

    def save(self, path: Path, days: int) -> None:
        path.write_text(json.dumps({"days": days, "findings": self.findings, "idle_seconds": self.idle_seconds,
                                    "allocated": str(self.allocated), "samples": self.samples}))

    @classmethod
    def load(cls, path: Path, days: int) -> Expected | None:
        """The timeline's figures saved by an earlier run's import of the same --days (None: import again)."""
        try:
            saved = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        if saved.get("days") != days:
            return None
        out = cls()
        out.findings, out.idle_seconds = saved["findings"], saved["idle_seconds"]
        out.allocated, out.samples = Decimal(saved["allocated"]), saved["samples"]
        return out


def generate(begin: int, end: int, expected: Expected):
    for gpu in range(PROFILED + UTIL_ONLY + MIG):
        mig = gpu >= PROFILED + UTIL_ONLY
        profiled = gpu < PROFILED or mig
        base = {"gpu": str(gpu % 8), "UUID": f"GPU-{gpu // 2 if mig else gpu:05d}", "device": f"nvidia{gpu % 8}",
                "modelName": A100 if mig else H100}
        if mig:
            base |= {"GPU_I_PROFILE": "3g.40gb", "GPU_I_ID": str(gpu % 2 + 1)}
        base |= {"Hostname": f"node-{gpu // 8:03d}", "instance": f"node-{gpu // 8:03d}:9400", "job": "dcgm-exporter"}
        cursor = begin
        for s, e, job_start, tenant in _jobs(gpu, begin, end):
            if cursor < s:  # unallocated: FB_USED without pod labels
                stamps = _stamps(cursor, s)
                expected.samples += len(stamps)
                yield _line({"__name__": "DCGM_FI_DEV_FB_USED"} | base, 0, stamps)
            cursor = e
            pod = base | {"container": "main", "namespace": f"tenant-{tenant}", "pod": f"job-{gpu}-{job_start}"}
            # Segments of the job: (start, end, idle?)
            cuts = [(job_start + off, job_start + off + length) for off, length in IDLE]
            segments, t = [], job_start
            for a, b in cuts:
                segments += [(t, a, False), (a, b, True)]
                t = b
            segments.append((t, job_start + JOB_H * 3600, False))
            expected.allocated += Decimal(len(_stamps(s, e)) * INTERVAL)
            for a, b, idle in segments:
                a, b = max(a, s), min(b, e)
                if a >= b:
                    continue
                stamps = _stamps(a, b)
                if idle and gpu % 50 == 0 and len(stamps) > 10:
                    del stamps[5]  # one missed scrape, bridged
                if idle and b - a >= MIN_IDLE_S:
                    expected.findings += 1
                    expected.idle_seconds += b - a
                series = [("DCGM_FI_DEV_FB_USED", 2048.0 if idle else 30211.0)]
                if profiled:
                    series += [("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0.01 if idle else 0.83),
                               ("DCGM_FI_PROF_DRAM_ACTIVE", 0.0 if idle else 0.41)]
                else:
                    series += [("DCGM_FI_DEV_GPU_UTIL", 1.0 if idle else 97.0)]
                for name, value in series:
                    expected.samples += len(stamps)
                    yield _line({"__name__": name} | pod, value, stamps)
        if cursor < end:
            stamps = _stamps(cursor, end)
            expected.samples += len(stamps)
            yield _line({"__name__": "DCGM_FI_DEV_FB_USED"} | base, 0, stamps)


def import_month(url: str, begin: int, end: int, expected: Expected) -> float:
    from tests.support.victoriametrics import import_json_lines

    started = time.perf_counter()
    import_json_lines(url, generate(begin, end, expected))
    return time.perf_counter() - started


class TimedBilling:
    """Times billing's `measure_report` inside `measure.utilisation`: it is billing's black box (the
    allocated seconds), measured here so the activity side's own share of the utilisation figure shows."""

    def __init__(self, measure_report) -> None:  # type: ignore[no-untyped-def]
        self.measure_report, self.seconds = measure_report, 0.0

    def __call__(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        began = time.perf_counter()
        try:
            return self.measure_report(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - began


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (VictoriaMetrics), from /proc; 0 where /proc is absent."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class TimedClient:
    """Adds up the wall time spent waiting for the TSDB (queries and, in the roll-up phase, writes)."""

    def __init__(self, client) -> None:  # type: ignore[no-untyped-def]
        self.client, self.seconds, self.calls = client, 0.0, 0

    def range(self, query, start, end, step_seconds):  # type: ignore[no-untyped-def]
        began = time.perf_counter()
        try:
            return self.client.range(query, start, end, step_seconds)
        finally:
            self.seconds += time.perf_counter() - began
            self.calls += 1

    def instant(self, query, at):  # type: ignore[no-untyped-def]
        began = time.perf_counter()
        try:
            return self.client.instant(query, at)
        finally:
            self.seconds += time.perf_counter() - began
            self.calls += 1

    def export_lines(self, selector, start, end):  # type: ignore[no-untyped-def]
        began = time.perf_counter()  # the HTTP answer only: decoding the JSON lines is Python's time
        try:
            return self.client.export_lines(selector, start, end)
        finally:
            self.seconds += time.perf_counter() - began
            self.calls += 1

    def import_json_lines(self, lines) -> None:  # type: ignore[no-untyped-def]
        lines = list(lines)  # built by Python first: only the write itself counts as TSDB time
        began = time.perf_counter()
        try:
            self.client.import_json_lines(lines)
        finally:
            self.seconds += time.perf_counter() - began
            self.calls += 1


class Phase:
    """Wall, TSDB wait, and CPU seconds (this Python process, VictoriaMetrics) of one timed phase."""

    def __init__(self, client: TimedClient, pid: int) -> None:
        self.client, self.pid = client, pid

    def __enter__(self) -> Phase:
        self.t0, self.cpu0, self.vm0 = time.perf_counter(), time.process_time(), _cpu_seconds(self.pid)
        self.tsdb0, self.calls0 = self.client.seconds, self.client.calls
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.t0
        self.python = time.process_time() - self.cpu0
        self.vm = _cpu_seconds(self.pid) - self.vm0
        self.tsdb = self.client.seconds - self.tsdb0
        self.calls = self.client.calls - self.calls0

    def line(self) -> str:
        return (f"{self.wall:.2f} s wall, {self.tsdb:.2f} s in the TSDB ({self.tsdb / self.wall:.0%}, "
                f"{self.calls} calls); CPU: Python {self.python:.2f} s, VictoriaMetrics {self.vm:.2f} s")


def _load() -> str:
    return " ".join(open("/proc/loadavg").read().split()[:3]) if os.path.exists("/proc/loadavg") else "?"


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--single-hours", type=int, default=6,
                        help="hours rolled up one at a time first, as the periodic task does (default 6)")
    parser.add_argument("--report-repeats", type=int, default=1,
                        help="time the month report this many times (the machine is shared: shows the spread)")
    parser.add_argument("--raw", action="store_true",
                        help="also time the raw month report (no roll-ups) and compare it with the roll-up one")
    parser.add_argument("--data", type=Path, default=None,
                        help="keep VictoriaMetrics' storage here and reuse it when it holds the same --days")
    args = parser.parse_args()

    from billing.metering.usage import FlavorSpec
    from infra.metrics import MetricsClient
    from scheduling.fleetops import measure, rollup
    from tests.support.victoriametrics import VictoriaMetrics

    flavors = [FlavorSpec("h100", "whole", H100, Decimal(1)),
               FlavorSpec("a100-3g", "mig", A100, Decimal("0.4286"), "3g.40gb")]
    end_dt = START + timedelta(days=args.days)
    begin, end = int(START.timestamp()), int(end_dt.timestamp())
    # The roll-ups' clock: pinned a day after the window, so every hour is settled and final.
    now = end_dt + timedelta(days=1)
    groups = [measure.ThresholdGroup(measure.Thresholds())]
    with tempfile.TemporaryDirectory(prefix="gpufleet-bench-fleet-") as tmp:
        data = args.data or Path(tmp)
        marker = data / "expected.json"
        reused = Expected.load(marker, args.days) if args.data else None
        if args.data and reused is None and (data / "storage").exists():
            shutil.rmtree(data / "storage")  # another --days, or an import that did not finish
        vm = VictoriaMetrics.start(data)
        try:
            if reused is None:
                marker.unlink(missing_ok=True)
                expected = Expected()
                import_s = import_month(vm.url, begin, end, expected)
                expected.save(marker, args.days)  # written only once the import is complete
                print(f"imported {expected.samples:,} samples in {import_s:.1f} s (not timed); load {_load()}")
            else:
                expected = reused
                print(f"reusing {expected.samples:,} samples imported earlier into {data} (and its roll-ups)")
            client = TimedClient(MetricsClient(vm.url))
            options = measure.Options(scrape_interval=INTERVAL)
            billing = TimedBilling(measure.billing_usage.measure_report)
            measure.billing_usage.measure_report = billing  # type: ignore[assignment]
            pid = vm.process.pid
            # 1. The periodic task's cost: a few settled hours rolled up one at a time.
            singles = min(args.single_hours, args.days * 24)
            with Phase(client, pid) as single:
                for hour in rollup.hours(START, START + timedelta(hours=singles)):
                    rollup.rollup_utilisation(client, flavors, hour, hour + rollup.HOUR, options, now)
                    rollup.rollup_idle(client, hour, hour + rollup.HOUR, options, groups, now)
            # 2. The backfill of the rest of the window, a day per call (the CLI's `fleet rollup`).
            with Phase(client, pid) as backfill:
                for kind in (rollup.UTIL, rollup.IDLE):
                    fp = (rollup.util_fingerprint(options, flavors) if kind == rollup.UTIL
                          else rollup.idle_fingerprint(options, groups))
                    todo = rollup.plan(rollup.coverage(client, kind, fp, START, end_dt), START, end_dt,
                                       rollup.DEFAULT_LATE_ALLOWANCE)
                    for lower, upper in todo:
                        for a, b in measure.billing_usage._chunks(lower, upper, 24):
                            if kind == rollup.UTIL:
                                rollup.rollup_utilisation(client, flavors, a, b, options, now)
                            else:
                                rollup.rollup_idle(client, a, b, options, groups, now)
            billing_in_rollups = billing.seconds
            # 3. The month report, reading the roll-ups: the figure against the target (each repeat is
            # timed and printed; the verdict uses the median repeat).
            repeats = []
            for _ in range(max(1, args.report_repeats)):
                with Phase(client, pid) as util_phase:
                    totals, util_raw_hours = rollup.utilisation_totals(client, flavors, START, end_dt, options)
                with Phase(client, pid) as idle_phase:
                    runs, idle_raw_hours = rollup.idle_runs(client, flavors, START, end_dt, options, groups,
                                                            min_seconds=MIN_IDLE_S)
                repeats.append((util_phase.wall + idle_phase.wall, util_phase, idle_phase))
                print(f"  report repeat: {repeats[-1][0]:.2f} s wall, CPU Python "
                      f"{util_phase.python + idle_phase.python:.2f} s, VictoriaMetrics "
                      f"{util_phase.vm + idle_phase.vm:.2f} s, load {_load()}", flush=True)
            _, util_phase, idle_phase = sorted(repeats, key=lambda r: r[0])[len(repeats) // 2]
            raw_phase = None
            if args.raw:
                with Phase(client, pid) as raw_phase:
                    raw_rows = measure.utilisation(client, flavors, START, end_dt, options)
                    raw_runs = measure.idle_runs(client, flavors, START, end_dt, options, groups)
                # Untimed: the per-hour rows and every run (no minimum) from the roll-ups, for the checks.
                rows, _ = rollup.utilisation(client, flavors, START, end_dt, options)
                all_runs, _ = rollup.idle_runs(client, flavors, START, end_dt, options, groups)
        finally:
            measure.billing_usage.measure_report = billing.measure_report
            vm.stop()
    hours = args.days * 24
    rolled = single.wall + backfill.wall
    print(f"roll-up, {singles} settled hours one at a time (the periodic task): {single.line()}; "
          f"per hour {single.wall / max(singles, 1):.2f} s wall, "
          f"{(single.python + single.vm) / max(singles, 1):.2f} CPU-s")
    print(f"roll-up, backfill of the other {hours - singles} hours a day per call: {backfill.line()}; "
          f"per hour {backfill.wall / max(hours - singles, 1):.3f} s wall, "
          f"{(backfill.python + backfill.vm) / max(hours - singles, 1):.3f} CPU-s")
    print(f"roll-up of the whole window: {rolled:.1f} s wall, "
          f"{single.python + single.vm + backfill.python + backfill.vm:.1f} CPU-s "
          f"(of which billing's measure_report {billing_in_rollups:.1f} s wall)")
    total = util_phase.wall + idle_phase.wall
    tsdb = util_phase.tsdb + idle_phase.tsdb
    allocated = sum((t[0] for t in totals.values()), Decimal(0))  # rollup.UTIL_FIELDS' order
    active = sum((t[2] for t in totals.values()), Decimal(0))
    idle_seconds = sum(r.idle_seconds for r in runs)
    signals = {sig: sum(1 for r in runs if r.signal == sig) for sig in ("profiling", "gpu_util")}
    print(f"report: utilisation from roll-ups ({len(totals):,} tenant x flavor totals, {util_raw_hours} hours raw): "
          f"{util_phase.line()}")
    print(f"report: idle findings from roll-ups ({len(runs):,} runs >= 60 min; {signals}; "
          f"{idle_raw_hours} hours raw): {idle_phase.line()}")
    share = tsdb / total
    print(f"report total: {total:.2f} s (target <= {TARGET_S:.0f} s) ratio {total / TARGET_S:.2f} of target "
          f"{'PASS' if total <= TARGET_S else 'FAIL'}; inside the TSDB {share:.0%}; CPU "
          f"{util_phase.python + idle_phase.python + util_phase.vm + idle_phase.vm:.2f} s")
    # Where the month's findings are computed: the roll-ups (per-slot evaluation inside the TSDB) and the report.
    computed = single.wall + backfill.wall + total
    computed_share = (single.tsdb + backfill.tsdb + tsdb) / computed
    print(f"the month's computation in this run (roll-ups {rolled:.1f} s + report {total:.2f} s): "
          f"{computed_share:.0%} inside the TSDB (target >= 50%) {'PASS' if computed_share >= 0.5 else 'FAIL'}; "
          f"the report alone {share:.0%} (decoding and assembling the findings is Python's)")
    print(f"fleet efficiency: {active / allocated:.3f}" if allocated else "no allocation")
    checks = {
        "findings": (len(runs), expected.findings),
        "idle seconds": (idle_seconds, expected.idle_seconds),
        "allocated seconds": (allocated, expected.allocated),
    }
    if raw_phase is not None:
        print(f"raw report (no roll-ups), for comparison: {raw_phase.line()}")
        checks["totals = raw path"] = (totals == rollup.totals_of(raw_rows), True)
        checks["rows = raw path"] = (rows == raw_rows, True)
        checks["runs >= 60 min = raw"] = (sorted(runs) == sorted(r for r in raw_runs if r.idle_seconds >= MIN_IDLE_S),
                                          True)
        checks["all runs = raw path"] = (sorted(all_runs) == sorted(raw_runs), True)
    exact = True
    for name, (got, want) in checks.items():
        ok = got == want
        exact &= ok
        print(f"  {name:<18} measured {got} expected {want} {'PASS' if ok else 'FAIL'}")
    print(f"load average: {_load()}")
    return 0 if exact and total <= TARGET_S and computed_share >= 0.5 else 1


if __name__ == "__main__":
    sys.exit(main())
