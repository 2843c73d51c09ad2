"""Run two scenarios on the same demand: B keeps its fleet, tenants and policies but takes A's jobs,
workload generators and endpoint traffic, so the difference is the change, not the luck of the draw."""

from __future__ import annotations

import copy
from typing import Any

from .engine import simulate
from .outputs import compare_runs
from .scenario import parse_scenario


def same_demand(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(b)
    for key in ("jobs", "workloads", "days"):
        if key in a:
            out[key] = copy.deepcopy(a[key])
        else:
            out.pop(key, None)
    traffic = {e["name"]: e.get("traffic") for e in a.get("endpoints", [])}
    for endpoint in out.get("endpoints", []):
        if traffic.get(endpoint["name"]) is not None:
            endpoint["traffic"] = copy.deepcopy(traffic[endpoint["name"]])
    return out


def compare(a: dict[str, Any], b: dict[str, Any], seed: int) -> dict[str, Any]:
    run_a = simulate(parse_scenario(a), seed)
    run_b = simulate(parse_scenario(same_demand(a, b)), seed)
    return {"seed": seed, "a": run_a, "b": run_b, "differences": compare_runs(run_a, run_b)}
