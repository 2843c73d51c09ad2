"""Autoscaling plan for one endpoint: try the candidate settings of the three layers on the same traffic
and recommend the best by composite score.

Layers, searched one after another (each keeps the best of the previous ones -- 10 runs instead of 36):
1. endpoint signal: duty-cycle (HPA on GPU utilisation), queue-depth, kv-cache;
2. minimum replicas: 0 (scale to zero), 1, the tier's minimum;
3. gang placement of the replica's pods: off, on;
4. node pool consolidation: WhenEmpty after 1 h, WhenEmptyOrUnderutilized.
"""

from __future__ import annotations

import copy
from typing import Any

from .engine import simulate
from .presets import apply_variant
from .scenario import parse_scenario


def _run(data: dict[str, Any], seed: int) -> dict[str, Any]:
    return simulate(parse_scenario(data), seed)


def plan(base: dict[str, Any], *, seed: int = 0, queue_target: float = 5, kv_target: float = 0.8,
         tier_min: int = 1) -> dict[str, Any]:
    """`base`: a scenario with one endpoint (`endpoints[0]`) on `fleet.node_pools[0]`."""
    layers: list[tuple[str, list[tuple[str, dict[str, dict[str, Any]]]]]] = [
        ("signal", [
            ("duty-cycle", {"endpoints.0": {"signal": "duty-cycle", "target": 0.8}}),
            ("queue-depth", {"endpoints.0": {"signal": "queue-depth", "target": queue_target}}),
            ("kv-cache", {"endpoints.0": {"signal": "kv-cache", "target": kv_target}}),
        ]),
        ("min_replicas", [(str(n), {"endpoints.0": {"min_replicas": n}}) for n in sorted({0, 1, tier_min})]),
        ("gang", [("off", {"endpoints.0": {"gang": False}}), ("on", {"endpoints.0": {"gang": True}})]),
        ("consolidation", [
            ("WhenEmpty 1h", {"fleet.node_pools.0": {"consolidation_policy": "WhenEmpty",
                                                     "consolidate_after_s": 3600}}),
            ("WhenEmptyOrUnderutilized", {"fleet.node_pools.0": {"consolidation_policy": "WhenEmptyOrUnderutilized",
                                                                 "consolidate_after_s": 0}}),
        ]),
    ]
    current = copy.deepcopy(base)
    chosen: dict[str, str] = {}
    tried: list[dict[str, Any]] = []
    best_run: dict[str, Any] | None = None
    for layer, options in layers:
        results = []
        for label, changes in options:
            data = apply_variant(current, changes)
            run = _run(data, seed)
            row = summary(run)
            tried.append({"layer": layer, "option": label, **row})
            results.append((row["score"], -row["requests_dropped"], label, data, run))
        # Best score; ties go to fewer dropped requests, then to the option listed first (cheaper, simpler).
        top = max(results, key=lambda r: (r[0], r[1], -[o[0] for o in options].index(r[2])))
        chosen[layer], current, best_run = top[2], top[3], top[4]
    return {"seed": seed, "recommended": chosen, "expected": summary(best_run or {}), "candidates": tried}


def summary(run: dict[str, Any]) -> dict[str, Any]:
    if not run:
        return {}
    ep = run["endpoints"][0]
    f = run["fleet"]
    return {"score": run["score"], "requests": ep["requests"], "requests_dropped": ep["requests_dropped"],
            "ttft_p99_s": ep["ttft_p99_s"], "replica_hours": ep["replica_hours"],
            "idle_gpu_minutes": f["idle_gpu_minutes"], "partial_gang_gpu_minutes": f["partial_gang_gpu_minutes"],
            "evictions": f["evictions"], "node_hours": f["node_hours"], "cost": f["cost"], "currency": f["currency"]}


def render_markdown(result: dict[str, Any], title: str, traffic_note: str) -> str:
    rec, exp = result["recommended"], result["expected"]
    lines = [f"# Autoscaling plan: {title}", "", traffic_note, "", "## Recommended settings", "",
             f"- Endpoint signal: **{rec['signal']}**",
             f"- Minimum replicas: **{rec['min_replicas']}**",
             f"- Gang placement of replica pods: **{rec['gang']}**",
             f"- Node pool consolidation: **{rec['consolidation']}**", "",
             "## Simulated with these settings", "",
             f"- {exp['requests_dropped']} of {exp['requests']} requests dropped or timed out; "
             f"p99 time to first token {exp['ttft_p99_s']} s",
             f"- {exp['replica_hours']} replica-hours, {exp['idle_gpu_minutes']} idle GPU-minutes "
             f"({exp['partial_gang_gpu_minutes']} in partial gangs), {exp['evictions']} evictions",
             f"- {exp['node_hours']} node-hours costing {exp['cost']} {exp['currency']}; score {exp['score']}", "",
             "## Every candidate (each layer keeps the best of the layers above)", "",
             "| layer | option | score | dropped | TTFT p99 s | replica-h | idle GPU-min | evictions | node-h |",
             "|---|---|---|---|---|---|---|---|---|"]
    for c in result["candidates"]:
        lines.append(f"| {c['layer']} | {c['option']} | {c['score']} | {c['requests_dropped']} | {c['ttft_p99_s']} | "
                     f"{c['replica_hours']} | {c['idle_gpu_minutes']} | {c['evictions']} | {c['node_hours']} |")
    lines += ["", f"Seed {result['seed']}; model and limits: docs/simulator.md."]
    return "\n".join(lines) + "\n"
