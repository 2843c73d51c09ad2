"""An endpoint's autoscaling plan: its recorded (or given) traffic through the planner
(scheduling/simulator/planner.py). Used by `gpufleet plan autoscaling` and the portal's plan button."""

from __future__ import annotations

from typing import Any

from scheduling.models import Flavor, InferenceEndpoint
from scheduling.simulation.inputs import endpoint_scenario, endpoint_traffic
from scheduling.simulator.planner import plan, render_markdown


def build_plan(endpoint: InferenceEndpoint, *, days: float, seed: int, traffic: list[float] | None,
               gpus_per_replica: int, rps_per_replica: float) -> dict[str, Any]:
    scenario = endpoint_scenario(endpoint, days=days, hourly_rps=[0.0], units_per_replica=gpus_per_replica,
                                 capacity_rps=rps_per_replica)
    if traffic is None:
        flavor = Flavor.objects.get(name=scenario["fleet"]["node_pools"][0]["flavor"])
        traffic = endpoint_traffic(endpoint, flavor, days, rps_per_replica / gpus_per_replica)
        note = (f"Traffic: {endpoint.tenant.slug}'s recorded hourly GPU use of {flavor.name} over {days:g} days, "
                f"at {rps_per_replica:g} requests/s per {gpus_per_replica}-GPU replica (a proxy: the platform "
                "stores GPU time, not request counts).")
    else:
        note = f"Traffic: {len(traffic)} hours given with --traffic."
    scenario["endpoints"][0]["traffic"] = {"hourly_rps": traffic}
    scenario["days"] = min(days, len(traffic) / 24) if traffic else days
    tier = endpoint.tier
    result = plan(scenario, seed=seed, queue_target=endpoint.queue_target,
                  kv_target=float(endpoint.kv_cache_target), tier_min=tier.min_replicas)
    result["markdown"] = render_markdown(result, f"{endpoint.tenant.slug}/{endpoint.name}", note)
    return result
