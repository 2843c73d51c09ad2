"""Simulator benchmark: 1,000 GPUs, 30 tenants, 100,000 jobs over 30 simulated days in <= 10 s.

One command: `.venv/bin/python benchmarks/simulator.py` (or `make bench`). Pure CPU, no services. The
fleet is 125 static nodes of 8 H100s; 30 tenants in 3 cohorts of 10 (nominal 33 GPUs each, borrowing
allowed), each submitting Poisson arrivals of jobs with 1/2/4 pods of 1/2/4/8 GPUs and exponential
durations (mean 84 min): about 75 % of the fleet's GPU-hours. Kueue admission with the platform's
preemption policies and gang placement. Timed: scenario expansion (job generation) plus the run.
Prints the figures, events per second, the ratio to the target, and a scaling table (--scaling) over
jobs and GPUs. Exits 1 when the target is missed. Options: --jobs N --gpus N --days D --seed S.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "platform")]

from scheduling.simulator.engine import Simulation  # noqa: E402
from scheduling.simulator.scenario import expand, parse_scenario  # noqa: E402

TARGET_S = 10.0


def scenario(jobs: int, gpus: int, tenants: int, days: float) -> dict:
    per_hour = jobs / tenants / (days * 24)
    nominal = gpus // tenants
    return {
        "name": "benchmark", "days": days,
        "fleet": {"node_pools": [{"name": "h100", "flavor": "h100", "gpus_per_node": 8, "nodes": gpus // 8,
                                  "provisioner": "none", "price_per_node_hour": "98.32"}]},
        "cohorts": [{"name": f"org-{c}"} for c in range(3)],
        "tenants": [{"name": f"team-{i:02d}", "cohort": f"org-{i % 3}",
                     "quotas": [{"flavor": "h100", "nominal": nominal}]} for i in range(tenants)],
        "workloads": [{"tenant": f"team-{i:02d}", "flavor": "h100", "jobs_per_hour": per_hour,
                       "pods": {"choices": [1, 2, 4], "weights": [7, 2, 1]},
                       "gpus_per_pod": {"choices": [1, 2, 4, 8], "weights": [4, 3, 2, 1]},
                       "duration_s": {"mean": 5040}} for i in range(tenants)],
    }


def run(jobs: int, gpus: int, tenants: int, days: float, seed: int) -> dict:
    started, cpu = time.perf_counter(), time.process_time()
    sc = expand(parse_scenario(scenario(jobs, gpus, tenants, days)), seed)
    sim = Simulation(sc, seed)
    out = sim.run()
    elapsed = time.perf_counter() - started
    return {"jobs": len(sc.jobs), "gpus": gpus, "seconds": elapsed, "cpu_seconds": time.process_time() - cpu,
            "events": sim.events,
            "events_per_s": sim.events / elapsed, "out": out}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--gpus", type=int, default=1000)
    ap.add_argument("--tenants", type=int, default=30)
    ap.add_argument("--days", type=float, default=30)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--scaling", action="store_true", help="also time 1/4 and 1/2 of the jobs and of the GPUs")
    args = ap.parse_args()
    res = run(args.jobs, args.gpus, args.tenants, args.days, args.seed)
    fleet = res["out"]["fleet"]
    waits = [t["wait_mean_s"] for t in res["out"]["tenants"]]
    print(f"simulated {res['jobs']} jobs, {args.gpus} GPUs, {args.tenants} tenants, {args.days:g} days "
          f"in {res['seconds']:.2f} s wall, {res['cpu_seconds']:.2f} s CPU ({res['events']} events, "
          f"{res['events_per_s']:,.0f} events/s)")
    print(f"  allocation {fleet['allocation']}  utilisation {fleet['utilisation']}  evictions {fleet['evictions']}"
          f"  mean wait per tenant {min(waits):.0f}..{max(waits):.0f} s")
    ratio = res["seconds"] / TARGET_S
    verdict = "PASS" if res["seconds"] <= TARGET_S else "FAIL"
    print(f"  target <= {TARGET_S:.0f} s: {verdict} (ratio {ratio:.2f} of the target)")
    if args.scaling:
        print("scaling (seconds, events/s):")
        for frac in (0.25, 0.5):
            j = run(int(args.jobs * frac), args.gpus, args.tenants, args.days * frac, args.seed)
            print(f"  jobs x{frac:<4} (same GPUs, days x{frac}): {j['seconds']:.2f} s, "
                  f"{j['events_per_s']:,.0f} events/s")
            g = run(int(args.jobs * frac), int(args.gpus * frac) // 8 * 8, args.tenants, args.days, args.seed)
            print(f"  jobs and GPUs x{frac:<4} (30 days):        {g['seconds']:.2f} s, "
                  f"{g['events_per_s']:,.0f} events/s")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
