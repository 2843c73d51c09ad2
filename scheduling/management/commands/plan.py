"""gpufleet plan autoscaling --endpoint SLUG/NAME [--days D] [--seed N] [--traffic FILE]
[--gpus-per-replica N] [--rps-per-replica R] [--output FILE] [--json]

Runs the candidate settings of the three layers (node pool consolidation, gang placement, endpoint
signal and minimum replicas) on the endpoint's recorded traffic and writes a short markdown plan with
the recommended settings and the simulated numbers behind them (scheduling/simulator/planner.py).
Traffic: --traffic (CSV `hour,rps`, one row per hour from the start) or, by default, the tenant's
recorded hourly GPU usage times --rps-per-replica / --gpus-per-replica (docs/simulator.md).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError, CommandParser

from gpufleet.command import GpufleetCommand
from scheduling.models import InferenceEndpoint
from scheduling.simulation.autoscaling_plan import build_plan
from scheduling.simulator import ScenarioError

from .simulate import read_text


def parse_hourly(text: str) -> list[float]:
    rows = list(csv.reader(io.StringIO(text)))
    if rows and rows[0] and not rows[0][0].strip().lstrip("-").isdigit():
        rows = rows[1:]  # header
    out: list[float] = []
    for i, row in enumerate(rows):
        if not row:
            continue
        try:
            hour, rps = int(row[0]), float(row[1])
        except (IndexError, ValueError) as exc:
            raise CommandError(f"--traffic: row {i + 1}: expected hour,rps") from exc
        if hour != len(out) or rps < 0:
            raise CommandError(f"--traffic: row {i + 1}: hours must count up from 0 and rps be >= 0")
        out.append(rps)
    if not out:
        raise CommandError("--traffic: no rows")
    return out


class Command(GpufleetCommand):
    help = "Plans: `autoscaling` recommends node pool, gang and endpoint settings from simulated traffic."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="what", required=True)
        auto = sub.add_parser("autoscaling", help="recommend scaling settings for an endpoint")
        auto.add_argument("--endpoint", required=True, metavar="SLUG/NAME")
        auto.add_argument("--days", type=float, default=2.0)
        auto.add_argument("--seed", type=int, default=0)
        auto.add_argument("--traffic", metavar="FILE")
        auto.add_argument("--gpus-per-replica", type=int, default=1)
        auto.add_argument("--rps-per-replica", type=float, default=2.0)
        auto.add_argument("--output", metavar="FILE", help="write the markdown plan here")
        auto.add_argument("--json", action="store_true")

    def handle(self, *args: object, **o: Any) -> None:
        slug, sep, name = o["endpoint"].partition("/")
        if not sep or not slug or not name:
            raise CommandError("--endpoint: expected SLUG/NAME")
        endpoint = InferenceEndpoint.objects.select_related("tenant", "tier").filter(
            tenant__slug=slug, name=name).first()
        if endpoint is None:
            raise CommandError(f"--endpoint: no endpoint {name!r} in tenant {slug!r}")
        if not 0 < o["days"] <= 31:
            raise CommandError("--days: must be in (0, 31]")
        if o["gpus_per_replica"] < 1 or o["rps_per_replica"] <= 0:
            raise CommandError("--gpus-per-replica must be >= 1 and --rps-per-replica > 0")
        traffic = parse_hourly(read_text(o["traffic"], "--traffic")) if o["traffic"] else None
        try:
            result = build_plan(endpoint, days=o["days"], seed=o["seed"], traffic=traffic,
                                gpus_per_replica=o["gpus_per_replica"], rps_per_replica=o["rps_per_replica"])
        except (ScenarioError, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        if o["output"]:
            Path(o["output"]).write_text(result["markdown"], encoding="utf-8")
        self.stdout.write(json.dumps(result, sort_keys=True) if o["json"] else result["markdown"])
