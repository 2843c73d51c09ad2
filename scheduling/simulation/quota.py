"""The simulated effect of a quota request on every tenant of its cohort, over recorded demand.

Both runs replay the same demand -- the last `days` of billing's hourly usage, reconstructed into jobs
(scheduling/simulator/replay.py) -- once with today's quotas and once with the request applied, so the
difference is the change alone. Reading the database is here; the simulation itself is the pure core.
"""

from __future__ import annotations

from typing import Any

from scheduling.models import QuotaChangeRequest
from scheduling.simulation.inputs import fleet_scenario, with_quota
from scheduling.simulator import parse_scenario, simulate
from scheduling.simulator.admission import root_of
from scheduling.simulator.compare import same_demand

KEYS = ("jobs", "wait_mean_s", "wait_p90_s", "wait_max_s", "gpu_hours", "borrowed_gpu_hours", "lent_gpu_hours")


def cohort_members(scenario: dict[str, Any], tenant: str) -> list[str]:
    parents = {c["name"]: c.get("parent") for c in scenario.get("cohorts", [])}
    cohort_of = {t["name"]: t.get("cohort") for t in scenario["tenants"]}
    root = root_of(cohort_of.get(tenant), parents)
    if root is None:
        return [tenant]
    return sorted(name for name, cohort in cohort_of.items() if root_of(cohort, parents) == root)


def effect(before: dict[str, Any], after: dict[str, Any], members: list[str]) -> list[dict[str, Any]]:
    """Per member: each figure before and after (pure)."""
    rows_before = {t["name"]: t for t in before["tenants"]}
    rows_after = {t["name"]: t for t in after["tenants"]}
    out = []
    for name in members:
        b, a = rows_before.get(name), rows_after.get(name)
        if b is None or a is None:
            continue
        out.append({"name": name, **{k: {"before": b[k], "after": a[k]} for k in KEYS}})
    return out


def simulate_request(request: QuotaChangeRequest, days: int, seed: int = 0) -> dict[str, Any]:
    base = fleet_scenario(days)
    proposed = with_quota(base, request.tenant.slug, request.flavor.name, request.nominal, request.borrowing_limit,
                          request.lending_limit)
    before = simulate(parse_scenario(base), seed)
    after = simulate(parse_scenario(same_demand(base, proposed)), seed)
    members = cohort_members(base, request.tenant.slug)
    return {"days": days, "seed": seed, "tenant": request.tenant.slug, "flavor": request.flavor.name,
            "jobs_replayed": len(base.get("jobs", [])), "tenants": effect(before, after, members),
            "score": {"before": before["score"], "after": after["score"]}}
