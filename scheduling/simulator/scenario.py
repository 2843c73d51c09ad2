"""Scenario files: JSON Schema validation, parsing into the model, and expansion of workload generators.

`SCHEMA` is the published schema (docs/simulator.md prints it with `python -m scheduling.simulator.scenario`).
`load_scenario(text)` takes YAML or JSON text (reading the file is the caller's job: the core does no I/O).
"""

from __future__ import annotations

import json
import math
import random
from decimal import Decimal, InvalidOperation
from typing import Any

import jsonschema
import yaml

from .model import (
    Cohort,
    Endpoint,
    Flavor,
    JobSpec,
    NodePool,
    Policies,
    Preemption,
    Prewarm,
    Quota,
    Scenario,
    Tenant,
    Traffic,
)


class ScenarioError(ValueError):
    """A scenario that does not validate: `field` is the JSON path of the offending value."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


_INT0 = {"type": "integer", "minimum": 0}
_NUM0 = {"type": "number", "minimum": 0}
_NAME = {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", "maxLength": 63}
_SIZE = {"oneOf": [{"type": "integer", "minimum": 1},
                   {"type": "object", "required": ["choices"], "additionalProperties": False,
                    "properties": {"choices": {"type": "array", "minItems": 1,
                                               "items": {"type": "integer", "minimum": 1}},
                                   "weights": {"type": "array", "items": _NUM0}}}]}
_DURATION = {"oneOf": [{"type": "number", "exclusiveMinimum": 0},
                       {"type": "object", "required": ["mean"], "additionalProperties": False,
                        "properties": {"mean": {"type": "number", "exclusiveMinimum": 0},
                                       "distribution": {"enum": ["fixed", "exponential", "lognormal"]},
                                       "sigma": _NUM0, "min": _NUM0, "max": _NUM0}}]}

SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://gpufleet.dev/schemas/simulator-scenario.json",
    "title": "gpufleet simulator scenario",
    "type": "object",
    "required": ["fleet", "tenants"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string"},
        "days": {"type": "number", "exclusiveMinimum": 0, "maximum": 366},
        "currency": {"type": "string", "pattern": "^[A-Z]{3}$"},
        "fleet": {
            "type": "object", "required": ["node_pools"], "additionalProperties": False,
            "properties": {
                "flavors": {"type": "array", "items": {
                    "type": "object", "required": ["name"], "additionalProperties": False,
                    "properties": {"name": _NAME, "mode": {"enum": ["whole", "mig", "hami"]},
                                   "slices_per_gpu": {"type": "integer", "minimum": 1, "maximum": 64}}}},
                "node_pools": {"type": "array", "minItems": 1, "items": {
                    "type": "object", "required": ["name", "flavor"], "additionalProperties": False,
                    "properties": {
                        "name": _NAME, "flavor": _NAME, "cluster": {"type": ["string", "null"]},
                        "gpus_per_node": {"type": "integer", "minimum": 1, "maximum": 64}, "nodes": _INT0,
                        "gpu_limit": _INT0, "provisioner": {"enum": ["karpenter", "cluster-autoscaler", "none"]},
                        "consolidation_policy": {"enum": ["WhenEmpty", "WhenEmptyOrUnderutilized"]},
                        "consolidate_after_s": _NUM0, "nodes_per_domain": _INT0,
                        "price_per_node_hour": {"type": "string", "pattern": "^[0-9]+(\\.[0-9]+)?$"},
                        "initial_used": {"type": "array", "items": _INT0}, "initial_used_until_s": _NUM0}}},
            }},
        "cohorts": {"type": "array", "items": {
            "type": "object", "required": ["name"], "additionalProperties": False,
            "properties": {"name": _NAME, "parent": {"type": ["string", "null"]}, "weight": _NUM0}}},
        "tenants": {"type": "array", "items": {
            "type": "object", "required": ["name"], "additionalProperties": False,
            "properties": {
                "name": _NAME, "cohort": {"type": ["string", "null"]}, "weight": _NUM0,
                "quotas": {"type": "array", "items": {
                    "type": "object", "required": ["flavor", "nominal"], "additionalProperties": False,
                    "properties": {"flavor": _NAME, "nominal": _INT0,
                                   "borrowing_limit": {"type": ["integer", "null"], "minimum": 0},
                                   "lending_limit": {"type": ["integer", "null"], "minimum": 0}}}}}}},
        "policies": {"type": "object", "additionalProperties": False, "properties": {
            "gang": {"type": "boolean"}, "fair_sharing": {"type": "boolean"},
            "preemption": {"type": "object", "additionalProperties": False, "properties": {
                "reclaim_within_cohort": {"enum": ["Never", "LowerPriority", "Any"]},
                "borrow_within_cohort": {"enum": ["Never", "LowerPriority"]},
                "within_cluster_queue": {"enum": ["Never", "LowerPriority"]}}}}},
        "jobs": {"type": "array", "items": {
            "type": "object", "required": ["tenant", "flavor", "submit_s", "duration_s"], "additionalProperties": False,
            "properties": {"tenant": _NAME, "flavor": _NAME, "submit_s": _NUM0,
                           "duration_s": {"type": "number", "exclusiveMinimum": 0},
                           "pods": {"type": "integer", "minimum": 1}, "gpus_per_pod": {"type": "integer", "minimum": 1},
                           "priority": {"type": "integer"}, "single_domain": {"type": "boolean"},
                           "max_nodes": _INT0}}},
        "workloads": {"type": "array", "items": {
            "type": "object", "required": ["tenant", "flavor", "jobs_per_hour", "duration_s"],
            "additionalProperties": False,
            "properties": {"tenant": _NAME, "flavor": _NAME, "jobs_per_hour": {"type": "number", "exclusiveMinimum": 0},
                           "hours": {"type": "array", "items": {"type": "number", "minimum": 0, "maximum": 24},
                                     "minItems": 2, "maxItems": 2},
                           "pods": _SIZE, "gpus_per_pod": _SIZE, "duration_s": _DURATION,
                           "priority": {"type": "integer"}, "single_domain": {"type": "boolean"},
                           "max_nodes": _INT0}}},
        "endpoints": {"type": "array", "items": {
            "type": "object", "required": ["name", "tenant", "pool"], "additionalProperties": False,
            "properties": {
                "name": _NAME, "tenant": _NAME, "pool": _NAME, "gpus_per_pod": {"type": "integer", "minimum": 1},
                "pods_per_replica": {"type": "integer", "minimum": 1}, "model_load_s": _NUM0,
                "min_replicas": _INT0, "max_replicas": {"type": "integer", "minimum": 1}, "cooldown_s": _NUM0,
                "polling_s": {"type": "number", "minimum": 10},
                "signal": {"enum": ["duty-cycle", "queue-depth", "kv-cache"]},
                "target": {"type": "number", "exclusiveMinimum": 0}, "gang": {"type": "boolean"},
                "capacity_rps": {"type": "number", "exclusiveMinimum": 0},
                "concurrency": {"type": "integer", "minimum": 1},
                "timeout_s": {"type": "number", "exclusiveMinimum": 0}, "base_ttft_s": _NUM0,
                "prewarm": {"type": "array", "items": {
                    "type": "object", "required": ["start_hour", "end_hour", "replicas"], "additionalProperties": False,
                    "properties": {"start_hour": {"type": "number", "minimum": 0, "maximum": 24},
                                   "end_hour": {"type": "number", "minimum": 0, "maximum": 24}, "replicas": _INT0}}},
                "traffic": {"type": "object", "additionalProperties": False, "properties": {
                    "base_rps": _NUM0, "diurnal_amplitude": {"type": "number", "minimum": 0, "maximum": 1},
                    "peak_hour": {"type": "number", "minimum": 0, "maximum": 24}, "bursts_per_day": _NUM0,
                    "burst_multiplier": _NUM0, "burst_duration_s": _NUM0,
                    "hourly_rps": {"type": "array", "items": _NUM0}}}}}},
    },
}


def _path(error: jsonschema.ValidationError) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path).lstrip(".") or "(root)"


def load_scenario(text: str) -> Scenario:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ScenarioError("(file)", f"not YAML or JSON: {exc}") from exc
    return parse_scenario(data)


def parse_scenario(data: Any) -> Scenario:
    """Validate against SCHEMA and the cross-references, then build the model."""
    validator = jsonschema.Draft202012Validator(SCHEMA)
    errors = sorted(validator.iter_errors(data), key=lambda e: (list(map(str, e.absolute_path)), e.message))
    if errors:
        raise ScenarioError(_path(errors[0]), errors[0].message)
    fleet = data["fleet"]
    pool_flavors = {p["flavor"] for p in fleet["node_pools"]}
    flavors = {f["name"]: Flavor(f["name"], f.get("mode", "whole"), f.get("slices_per_gpu", 1))
               for f in fleet.get("flavors", [])}
    for name in sorted(pool_flavors - set(flavors)):
        flavors[name] = Flavor(name)
    pools = []
    for i, p in enumerate(fleet["node_pools"]):
        try:
            price = Decimal(p.get("price_per_node_hour", "0"))
        except InvalidOperation as exc:  # pragma: no cover - the schema's pattern rules it out
            raise ScenarioError(f"fleet.node_pools[{i}].price_per_node_hour", "not a decimal") from exc
        pools.append(NodePool(
            p["name"], p["flavor"], p.get("gpus_per_node", 8), p.get("nodes", 0), p.get("gpu_limit", 0),
            p.get("provisioner", "karpenter"), p.get("consolidation_policy", "WhenEmpty"),
            float(p.get("consolidate_after_s", 3600)), p.get("nodes_per_domain", 0), price,
            tuple(p.get("initial_used", ())), float(p.get("initial_used_until_s", 0)), p.get("cluster")))
    pool_names = {p.name for p in pools}
    cohorts = tuple(Cohort(c["name"], c.get("parent"), float(c.get("weight", 1))) for c in data.get("cohorts", []))
    cohort_names = {c.name for c in cohorts}
    for i, c in enumerate(cohorts):
        if c.parent is not None and c.parent not in cohort_names:
            raise ScenarioError(f"cohorts[{i}].parent", f"unknown cohort {c.parent!r}")
    tenants = []
    for i, t in enumerate(data["tenants"]):
        cohort = t.get("cohort")
        if cohort is not None and cohort not in cohort_names:
            cohort_names.add(cohort)  # a cohort named only by its ClusterQueues, as in Kueue
            cohorts += (Cohort(cohort),)
        quotas = []
        for j, q in enumerate(t.get("quotas", [])):
            if q["flavor"] not in flavors:
                raise ScenarioError(f"tenants[{i}].quotas[{j}].flavor", f"no node pool serves flavor {q['flavor']!r}")
            quotas.append(Quota(q["flavor"], q["nominal"], q.get("borrowing_limit"), q.get("lending_limit")))
        tenants.append(Tenant(t["name"], cohort, float(t.get("weight", 1)), tuple(quotas)))
    tenant_names = {t.name for t in tenants}
    if len(tenant_names) != len(tenants):
        raise ScenarioError("tenants", "tenant names must be unique")
    jobs = []
    for i, j in enumerate(data.get("jobs", [])):
        if j["tenant"] not in tenant_names:
            raise ScenarioError(f"jobs[{i}].tenant", f"unknown tenant {j['tenant']!r}")
        jobs.append(JobSpec(i, j["tenant"], j["flavor"], float(j["submit_s"]), j.get("pods", 1),
                            j.get("gpus_per_pod", 1),
                            float(j["duration_s"]), j.get("priority", 0), j.get("single_domain", False),
                            j.get("max_nodes", 0)))
    for i, w in enumerate(data.get("workloads", [])):
        if w["tenant"] not in tenant_names:
            raise ScenarioError(f"workloads[{i}].tenant", f"unknown tenant {w['tenant']!r}")
    endpoints = []
    for i, e in enumerate(data.get("endpoints", [])):
        if e["pool"] not in pool_names:
            raise ScenarioError(f"endpoints[{i}].pool", f"unknown node pool {e['pool']!r}")
        tr = e.get("traffic", {})
        traffic = Traffic(tr.get("base_rps", 1.0), tr.get("diurnal_amplitude", 0.0), tr.get("peak_hour", 14.0),
                          tr.get("bursts_per_day", 0.0), tr.get("burst_multiplier", 1.0),
                          tr.get("burst_duration_s", 600.0), tuple(tr.get("hourly_rps", ())))
        endpoints.append(Endpoint(
            e["name"], e["tenant"], e["pool"], e.get("gpus_per_pod", 1), e.get("pods_per_replica", 1),
            e.get("model_load_s", 120.0), e.get("min_replicas", 1), e.get("max_replicas", 4),
            e.get("cooldown_s", 300.0), e.get("polling_s", 30.0), e.get("signal", "queue-depth"),
            e.get("target", 5.0), e.get("gang", False), e.get("capacity_rps", 1.0), e.get("concurrency", 16),
            e.get("timeout_s", 60.0), e.get("base_ttft_s", 0.3),
            tuple(Prewarm(p["start_hour"], p["end_hour"], p["replicas"]) for p in e.get("prewarm", [])), traffic))
    pol = data.get("policies", {})
    pre = pol.get("preemption", {})
    policies = Policies(pol.get("gang", True), pol.get("fair_sharing", False), Preemption(
        pre.get("reclaim_within_cohort", "Any"), pre.get("borrow_within_cohort", "LowerPriority"),
        pre.get("within_cluster_queue", "LowerPriority")))
    return Scenario(data.get("name", "scenario"), float(data.get("days", 1)), tuple(flavors.values()), tuple(pools),
                    cohorts, tuple(tenants), tuple(jobs), tuple(endpoints), policies, data.get("currency", "USD"),
                    tuple(data.get("workloads", [])))


def _size(spec: Any, rng: random.Random) -> int:
    if isinstance(spec, int):
        return spec
    choices = spec["choices"]
    weights = spec.get("weights")
    return rng.choices(choices, weights=weights)[0] if weights else rng.choice(choices)


def _duration(spec: Any, rng: random.Random) -> float:
    if isinstance(spec, int | float):
        return float(spec)
    mean, kind = float(spec["mean"]), spec.get("distribution", "exponential")
    if kind == "fixed":
        value = mean
    elif kind == "lognormal":
        sigma = float(spec.get("sigma", 1.0))
        value = rng.lognormvariate(math.log(mean) - sigma * sigma / 2, sigma)
    else:
        value = rng.expovariate(1.0 / mean)
    value = max(value, float(spec.get("min", 1.0)))
    if spec.get("max"):
        value = min(value, float(spec["max"]))
    return round(value, 3)


def generate_jobs(generators: tuple[dict, ...], horizon_s: float, seed: int, first_id: int) -> list[JobSpec]:
    """Poisson arrivals per generator, each generator with its own seeded stream (adding a generator does
    not change the jobs of the others)."""
    jobs: list[JobSpec] = []
    next_id = first_id
    for index, g in enumerate(generators):
        rng = random.Random(seed * 1_000_003 + index)
        rate = float(g["jobs_per_hour"]) / 3600.0
        window = g.get("hours")
        t = 0.0
        while True:
            t += rng.expovariate(rate)
            if t >= horizon_s:
                break
            if window is not None:
                hour = (t / 3600.0) % 24
                start, end = window
                if not (start <= hour < end if start <= end else hour >= start or hour < end):
                    continue
            jobs.append(JobSpec(next_id, g["tenant"], g["flavor"], round(t, 3), _size(g.get("pods", 1), rng),
                                _size(g.get("gpus_per_pod", 1), rng), _duration(g["duration_s"], rng),
                                g.get("priority", 0), g.get("single_domain", False), g.get("max_nodes", 0)))
            next_id += 1
    return jobs


def expand(scenario: Scenario, seed: int) -> Scenario:
    """The scenario with its generators' jobs added (explicit jobs first)."""
    if not scenario.generators:
        return scenario
    from dataclasses import replace

    extra = generate_jobs(scenario.generators, scenario.horizon_s, seed, len(scenario.jobs))
    return replace(scenario, jobs=scenario.jobs + tuple(extra), generators=())


if __name__ == "__main__":  # print the published schema
    print(json.dumps(SCHEMA, indent=2, sort_keys=True))
