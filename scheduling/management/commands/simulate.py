"""gpufleet simulate (--scenario FILE | --preset NAME | --from-fleet | --compare A B) [--seed N] [--days D]
[--trace FILE [--trace-start ISO]] [--json]

Runs the fleet simulator (scheduling/simulator, docs/simulator.md). Output: one JSON document with
--json (a run: {"seed", "tenants", "endpoints", "fleet", "score"}; a preset: {"seed", "variants": {NAME:
run}}; --compare: {"seed", "a", "b", "differences"}), else a readable table.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError, CommandParser

from gpufleet.command import GpufleetCommand
from scheduling.simulation.inputs import fleet_scenario
from scheduling.simulator import PRESETS, ScenarioError, render_table, run_preset, simulate
from scheduling.simulator.compare import compare
from scheduling.simulator.replay import parse_trace
from scheduling.simulator.scenario import load_scenario, parse_scenario


def read_text(path: str, option: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise CommandError(f"{option}: cannot read {path}: {exc.strerror}") from exc


def load_dict(path: str, option: str) -> dict[str, Any]:
    import yaml

    try:
        data = yaml.safe_load(read_text(path, option))
    except yaml.YAMLError as exc:
        raise CommandError(f"{option}: not YAML or JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise CommandError(f"{option}: a scenario is a mapping")
    return data


class Command(GpufleetCommand):
    help = "Simulate the fleet: quotas, scheduling policy, node provisioning and autoscaling on a demand."

    def add_arguments(self, parser: CommandParser) -> None:
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("--scenario", metavar="FILE", help="scenario YAML/JSON (schema in docs/simulator.md)")
        source.add_argument("--preset", choices=sorted(PRESETS), help="a built-in comparison of variants")
        source.add_argument("--from-fleet", action="store_true",
                            help="this platform's fleet, tenants, quotas and policies, with its recorded usage")
        source.add_argument("--compare", nargs=2, metavar=("A", "B"), help="two scenarios on A's demand")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--days", type=float, default=None, help="simulated days (default: the scenario's)")
        parser.add_argument("--trace", metavar="FILE", help="job trace CSV/JSON replacing the scenario's demand")
        parser.add_argument("--trace-start", default=None, help="ISO 8601 time of t=0 when the trace has timestamps")
        parser.add_argument("--json", action="store_true", help="print one JSON document")

    def handle(self, *args: object, **o: Any) -> None:
        if o["days"] is not None and not 0 < o["days"] <= 366:
            raise CommandError("--days: must be in (0, 366]")
        try:
            doc = self.run(o)
        except ScenarioError as exc:
            raise CommandError(f"scenario: {exc}") from exc
        if o["json"]:
            self.stdout.write(json.dumps(doc, sort_keys=True))
        elif "differences" in doc:
            self.stdout.write(json.dumps(doc["differences"], indent=2, sort_keys=True))
        else:
            self.stdout.write(render_table(doc))

    def run(self, o: dict[str, Any]) -> dict[str, Any]:
        seed = o["seed"]
        if o["preset"]:
            if o["trace"]:
                raise CommandError("--trace: a preset brings its own demand")
            return run_preset(o["preset"], seed, o["days"])
        if o["compare"]:
            a, b = (self.with_inputs(load_dict(path, "--compare"), o) for path in o["compare"])
            return compare(a, b, seed)
        if o["from_fleet"]:
            data = fleet_scenario(o["days"] or 7, with_demand=not o["trace"])
            return simulate(parse_scenario(self.with_inputs(data, o)), seed)
        data = self.with_inputs(load_dict(o["scenario"], "--scenario"), o)
        load_scenario(json.dumps(data))  # validate before anything runs
        return simulate(parse_scenario(data), seed)

    def with_inputs(self, data: dict[str, Any], o: dict[str, Any]) -> dict[str, Any]:
        if o["days"] is not None:
            data["days"] = o["days"]
        if o["trace"]:
            start = None
            if o["trace_start"]:
                try:
                    start = datetime.fromisoformat(o["trace_start"].replace("Z", "+00:00"))
                except ValueError as exc:
                    raise CommandError("--trace-start: not an ISO 8601 time") from exc
                if start.tzinfo is None:
                    raise CommandError("--trace-start: needs a UTC offset")
            data["jobs"] = parse_trace(read_text(o["trace"], "--trace"), start)
            data.pop("workloads", None)
        return data
