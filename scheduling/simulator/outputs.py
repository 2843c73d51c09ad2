"""The run document (the CLI contract), its readable table, and the difference between two runs.

Composite score (docs/simulator.md): a weighted mean, in 0..100, of the parts a run has --
  jobs      0.4 x 1 / (1 + mean job wait in hours)
  serving   0.4 x (requests served / requests) x 1 / (1 + worst endpoint p99 TTFT in s / 10)
  use       0.2 x utilisation (busy GPU-time / GPU-time of the nodes present)
weights of absent parts (no jobs, no endpoints) are dropped and the rest renormalised.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal
from typing import TYPE_CHECKING, Any

from .metrics import histogram_percentile, percentile, r

if TYPE_CHECKING:
    from .engine import Simulation

CENT = Decimal("0.01")


def score(mean_wait_s: float | None, served: int, requests: int, utilisation: float, ttft_p99_s: float = 0.0) -> float:
    parts: list[tuple[float, float]] = []
    if mean_wait_s is not None:
        parts.append((0.4, 1.0 / (1.0 + mean_wait_s / 3600.0)))
    if requests:
        parts.append((0.4, served / requests / (1.0 + ttft_p99_s / 10.0)))
    parts.append((0.2, utilisation))
    total = sum(w for w, _ in parts)
    return r(100.0 * sum(w * v for w, v in parts) / total, 2)


def build_run(sim: Simulation) -> dict[str, Any]:
    now = sim.now
    waits: dict[str, list[float]] = {name: list(st.waits) for name, st in sim.tenants.items()}
    used: dict[str, float] = {name: st.unit_s for name, st in sim.tenants.items()}
    for wl in sim.by_seq.values():
        if wl.job is None:
            continue
        tenant = wl.job.tenant
        if wl.state == "queued":
            waits[tenant].append(wl.waited_s + now - wl.queued_s)  # censored: still waiting at the end
        elif wl.state == "admitted":
            waits[tenant].append(wl.waited_s + now - wl.admitted_s)
        elif wl.state == "running":
            used[tenant] += wl.units * (now - wl.started_s) / sim.pools[wl.pool].slices
    tenants = []
    all_waits: list[float] = []
    for name in sorted(sim.tenants):
        st = sim.tenants[name]
        w = sorted(waits[name])
        all_waits += w
        tenants.append({
            "name": name, "jobs": st.jobs,
            "wait_mean_s": r(sum(w) / len(w), 1) if w else 0.0,
            "wait_p50_s": r(percentile(w, 50), 1), "wait_p90_s": r(percentile(w, 90), 1),
            "wait_max_s": r(w[-1], 1) if w else 0.0,
            "gpu_hours": r(used[name] / 3600), "borrowed_gpu_hours": r(st.borrowed_s / 3600),
            "lent_gpu_hours": r(st.lent_s / 3600),
        })
    endpoints = []
    served = requests = 0
    for name in sorted(sim.endpoints):
        es = sim.endpoints[name]
        served += es.served
        requests += es.requests
        endpoints.append({
            "name": name, "requests": es.requests, "requests_served": es.served,
            "requests_dropped": es.dropped, "ttft_p99_s": r(histogram_percentile(es.ttft, 99), 1),
            "replica_hours": r(es.replica_s / 3600),
        })
    cap = sim.cap_s or 1.0
    busy = sim.busy_s + sim.replica_busy_s
    cost = Decimal(0)
    node_hours = 0.0
    for ps in sim.pools.values():
        hours = ps.node_s / 3600
        node_hours += hours
        cost += Decimal(repr(round(hours, 6))) * ps.spec.price_per_node_hour
    utilisation = busy / cap
    fleet = {
        "allocation": r(sim.alloc_s / cap, 4), "utilisation": r(utilisation, 4),
        "idle_gpu_minutes": r(max(0.0, sim.alloc_s - busy) / 60, 1),
        "partial_gang_gpu_minutes": r(sim.partial_s / 60, 1),
        "evictions": sim.evictions, "node_hours": r(node_hours),
        "cost": str(cost.quantize(CENT, rounding=ROUND_HALF_UP)), "currency": sim.sc.currency,
    }
    mean_wait = sum(all_waits) / len(all_waits) if all_waits else None
    return {"seed": sim.seed, "tenants": tenants, "endpoints": endpoints, "fleet": fleet,
            "score": score(mean_wait, served, requests, utilisation,
                           max((e["ttft_p99_s"] for e in endpoints), default=0.0))}


def render_table(doc: dict[str, Any]) -> str:
    """A readable summary of a run or of a preset's variants."""
    if "variants" in doc:
        return "\n\n".join(f"== {name} ==\n{render_table(run)}" for name, run in doc["variants"].items())
    lines = [f"seed {doc['seed']}  score {doc['score']}"]
    if doc["tenants"]:
        lines.append(f"{'tenant':<20}{'jobs':>7}{'wait mean s':>13}{'p50':>9}{'p90':>9}{'max':>9}"
                     f"{'GPU-h':>10}{'borrowed':>10}{'lent':>10}")
        for t in doc["tenants"]:
            lines.append(f"{t['name']:<20}{t['jobs']:>7}{t['wait_mean_s']:>13}{t['wait_p50_s']:>9}"
                         f"{t['wait_p90_s']:>9}{t['wait_max_s']:>9}{t['gpu_hours']:>10}"
                         f"{t['borrowed_gpu_hours']:>10}{t['lent_gpu_hours']:>10}")
    if doc["endpoints"]:
        lines.append(f"{'endpoint':<20}{'requests':>10}{'served':>10}{'dropped':>10}{'ttft p99 s':>12}"
                     f"{'replica-h':>11}")
        for e in doc["endpoints"]:
            lines.append(f"{e['name']:<20}{e['requests']:>10}{e['requests_served']:>10}{e['requests_dropped']:>10}"
                         f"{e['ttft_p99_s']:>12}{e['replica_hours']:>11}")
    f = doc["fleet"]
    lines.append(f"fleet: allocation {f['allocation']}  utilisation {f['utilisation']}  idle GPU-min "
                 f"{f['idle_gpu_minutes']}  partial-gang GPU-min {f['partial_gang_gpu_minutes']}  evictions "
                 f"{f['evictions']}  node-h {f['node_hours']}  cost {f['cost']} {f['currency']}")
    return "\n".join(lines)


def _diff(a: Any, b: Any) -> Any:
    if isinstance(a, bool) or isinstance(b, bool):
        return None if a == b else {"a": a, "b": b}
    if isinstance(a, int | float) and isinstance(b, int | float):
        return None if a == b else {"a": a, "b": b, "delta": r(b - a, 4)}
    if isinstance(a, str) and isinstance(b, str):
        try:
            da, db = Decimal(a), Decimal(b)
        except ArithmeticError:
            return None if a == b else {"a": a, "b": b}
        return None if da == db else {"a": a, "b": b, "delta": str(db - da)}
    return None if a == b else {"a": a, "b": b}


def compare_runs(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Per-key differences between two runs on the same demand (keys that did not change are left out)."""
    out: dict[str, Any] = {"seed": a["seed"], "score": _diff(a["score"], b["score"]), "fleet": {}, "tenants": {},
                           "endpoints": {}}
    for key in a["fleet"]:
        d = _diff(a["fleet"][key], b["fleet"].get(key))
        if d is not None:
            out["fleet"][key] = d
    for section in ("tenants", "endpoints"):
        rows_b = {row["name"]: row for row in b[section]}
        for row in a[section]:
            other = rows_b.get(row["name"])
            if other is None:
                continue
            changes = {k: d for k in row if k != "name" and (d := _diff(row[k], other[k])) is not None}
            if changes:
                out[section][row["name"]] = changes
    return out
