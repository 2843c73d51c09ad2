"""Built-in scenarios reproducing the failure modes GPU platforms hit; each compares variants on the same
demand (same seed, same generated jobs, same request stream)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from .engine import simulate
from .scenario import parse_scenario


def _h100_pool(**over: Any) -> dict[str, Any]:
    pool = {"name": "h100", "flavor": "h100", "gpus_per_node": 8, "nodes": 2, "gpu_limit": 64,
            "provisioner": "karpenter", "consolidation_policy": "WhenEmpty", "consolidate_after_s": 600,
            "price_per_node_hour": "98.32"}
    pool.update(over)
    return pool


def seven_of_eight() -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """A 70B fine-tune needing 8 GPUs on at most 2 nodes arrives when 7 are free across 3 nodes (3+2+2):
    pod-by-pod binds 7 pods that hold their GPUs idle while Karpenter brings a node; gang binds nothing
    until all 8 fit. More such jobs and small jobs follow through the day."""
    base = {
        "name": "seven-of-eight", "days": 1,
        "fleet": {"node_pools": [_h100_pool(nodes=3, initial_used=[5, 6, 6], initial_used_until_s=4 * 3600)]},
        "tenants": [{"name": "llm", "quotas": [{"flavor": "h100", "nominal": 64}]}],
        "jobs": [{"tenant": "llm", "flavor": "h100", "submit_s": 0, "pods": 8, "gpus_per_pod": 1,
                  "duration_s": 7200, "max_nodes": 2}],
        "workloads": [
            {"tenant": "llm", "flavor": "h100", "jobs_per_hour": 1.5, "pods": 8, "gpus_per_pod": 1,
             "duration_s": {"mean": 5400, "distribution": "lognormal", "sigma": 0.5}, "max_nodes": 2},
            {"tenant": "llm", "flavor": "h100", "jobs_per_hour": 6, "pods": {"choices": [1, 2]},
             "duration_s": {"mean": 1800}},
        ],
    }
    return base, {"pod-by-pod": {"policies": {"gang": False}}, "gang": {"policies": {"gang": True}}}


def consolidation() -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """A 24x7 chat endpoint with diurnal traffic: WhenEmptyOrUnderutilized repacks replicas at night and
    evicts live pods (each eviction drops the requests in flight and reloads the model); WhenEmpty with
    consolidateAfter 1 h never evicts and pays for emptier nodes instead."""
    base = {
        "name": "consolidation", "days": 2,
        "fleet": {"node_pools": [_h100_pool(nodes=4, gpu_limit=96)]},
        "tenants": [{"name": "serving"}],
        "endpoints": [{"name": "chat", "tenant": "serving", "pool": "h100", "gpus_per_pod": 2, "pods_per_replica": 1,
                       "model_load_s": 180, "min_replicas": 2, "max_replicas": 16, "cooldown_s": 600,
                       "signal": "queue-depth", "target": 8, "capacity_rps": 2.0, "concurrency": 16,
                       "timeout_s": 30, "traffic": {"base_rps": 10, "diurnal_amplitude": 0.8, "peak_hour": 15}}],
    }
    return base, {
        "WhenEmptyOrUnderutilized": {"fleet.node_pools.0": {"consolidation_policy": "WhenEmptyOrUnderutilized",
                                                            "consolidate_after_s": 0}},
        "WhenEmpty": {"fleet.node_pools.0": {"consolidation_policy": "WhenEmpty", "consolidate_after_s": 3600}},
    }


def autoscalers() -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Bursty traffic to a 70B model served by replicas of 2 pods x 4 GPUs, sharing the pool with training:
    HPA on GPU duty cycle (saturates at 100 %), KEDA on queue depth, and queue depth with gang placement of
    the replicas (and of the training jobs)."""
    base = {
        "name": "autoscalers", "days": 2,
        "fleet": {"node_pools": [_h100_pool(nodes=4, gpu_limit=96)]},
        "tenants": [{"name": "serving"}, {"name": "training", "quotas": [{"flavor": "h100", "nominal": 32}]}],
        "workloads": [{"tenant": "training", "flavor": "h100", "jobs_per_hour": 3, "pods": {"choices": [1, 2, 4]},
                       "gpus_per_pod": {"choices": [1, 2]}, "duration_s": {"mean": 2700}}],
        "endpoints": [{"name": "llm-70b", "tenant": "serving", "pool": "h100", "gpus_per_pod": 4,
                       "pods_per_replica": 2, "model_load_s": 240, "min_replicas": 1, "max_replicas": 8,
                       "cooldown_s": 300, "capacity_rps": 3.0, "concurrency": 24, "timeout_s": 60,
                       "traffic": {"base_rps": 4, "diurnal_amplitude": 0.5, "peak_hour": 14, "bursts_per_day": 8,
                                   "burst_multiplier": 4, "burst_duration_s": 900}}],
    }
    return base, {
        "duty-cycle": {"policies": {"gang": False}, "endpoints.0": {"signal": "duty-cycle", "target": 0.8}},
        "queue-depth": {"policies": {"gang": False}, "endpoints.0": {"signal": "queue-depth", "target": 24}},
        "gang-aware": {"policies": {"gang": True},
                       "endpoints.0": {"signal": "queue-depth", "target": 24, "gang": True}},
    }


def fair_share() -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Three teams share a 32-GPU cohort; `nightly` floods it every night with long jobs. Without fair
    sharing its older queued jobs take every borrowable GPU first; with fair sharing the team with the
    lowest share borrows first and can preempt a bigger borrower."""
    day = {"flavor": "h100", "jobs_per_hour": 2, "hours": [7, 21], "pods": {"choices": [1, 2]},
           "gpus_per_pod": {"choices": [2, 4]}, "duration_s": {"mean": 5400}}
    base = {
        "name": "fair-share", "days": 3,
        "fleet": {"node_pools": [_h100_pool(nodes=4, provisioner="none")]},
        "cohorts": [{"name": "research"}],
        "tenants": [{"name": t, "cohort": "research", "quotas": [{"flavor": "h100", "nominal": n}]}
                    for t, n in (("vision", 12), ("speech", 12), ("nightly", 8))],
        "workloads": [dict(day, tenant="vision"), dict(day, tenant="speech"),
                      {"tenant": "nightly", "flavor": "h100", "jobs_per_hour": 12, "hours": [21, 24],
                       "pods": 2, "gpus_per_pod": 2, "duration_s": {"mean": 4 * 3600, "distribution": "fixed"}}],
    }
    return base, {"no-fair-sharing": {"policies": {"fair_sharing": False}},
                  "fair-sharing": {"policies": {"fair_sharing": True}}}


PRESETS: Mapping[str, Callable[[], tuple[dict[str, Any], dict[str, dict[str, Any]]]]] = MappingProxyType({
    "seven-of-eight": seven_of_eight, "consolidation": consolidation, "autoscalers": autoscalers,
    "fair-share": fair_share,
})


def apply_variant(base: dict[str, Any], changes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Merge a variant's changes; keys are dotted paths (`endpoints.0`) to the dict they update."""
    data = copy.deepcopy(base)
    for path, values in changes.items():
        target: Any = data
        for part in path.split("."):
            target = target[int(part)] if isinstance(target, list) else target.setdefault(part, {})
        target.update(values)
    return data


def preset_scenarios(name: str, days: float | None = None) -> dict[str, dict[str, Any]]:
    base, variants = PRESETS[name]()
    if days is not None:
        base["days"] = days
    return {variant: apply_variant(base, changes) for variant, changes in variants.items()}


def run_preset(name: str, seed: int = 0, days: float | None = None) -> dict[str, Any]:
    if name not in PRESETS:
        raise KeyError(name)
    return {"seed": seed, "variants": {variant: simulate(parse_scenario(data), seed)
                                       for variant, data in preset_scenarios(name, days).items()}}
