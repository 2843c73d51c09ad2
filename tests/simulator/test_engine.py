"""Engine behaviour on small hand-worked scenarios: MIG units, provisioner delays, scale to zero and
pre-warm, and the HPA duty-cycle trap."""

from __future__ import annotations

import pytest

from scheduling.simulator import parse_scenario, simulate
from scheduling.simulator.autoscaling import desired_replicas
from scheduling.simulator.model import Endpoint


def one_job(pool: dict, job: dict, flavors: list | None = None, days: float = 0.5) -> dict:
    data = {"days": days, "fleet": {"node_pools": [pool], **({"flavors": flavors} if flavors else {})},
            "tenants": [{"name": "a", "quotas": [{"flavor": pool["flavor"], "nominal": 64}]}],
            "jobs": [dict({"tenant": "a", "flavor": pool["flavor"], "submit_s": 0}, **job)]}
    return simulate(parse_scenario(data), seed=5)


def test_mig_units_count_as_gpu_fractions():
    # 7 x 1g.10gb instances per GPU: 14 instances for an hour are 2 GPU-hours.
    run = one_job({"name": "mig", "flavor": "a100-1g", "nodes": 1, "gpus_per_node": 8, "provisioner": "none"},
                  {"pods": 2, "gpus_per_pod": 7, "duration_s": 3600},
                  flavors=[{"name": "a100-1g", "mode": "mig", "slices_per_gpu": 7}])
    assert run["tenants"][0]["gpu_hours"] == pytest.approx(2.0)


@pytest.mark.parametrize(("provisioner", "low", "high"), [("karpenter", 45, 60), ("cluster-autoscaler", 90, 120)])
def test_a_job_on_an_empty_pool_waits_for_its_provisioner(provisioner, low, high):
    run = one_job({"name": "p", "flavor": "h100", "nodes": 0, "gpu_limit": 16, "provisioner": provisioner},
                  {"pods": 1, "gpus_per_pod": 8, "duration_s": 600})
    assert low <= run["tenants"][0]["wait_max_s"] <= high
    assert run["fleet"]["node_hours"] > 0


def test_gpu_limit_caps_the_pool():
    run = one_job({"name": "p", "flavor": "h100", "nodes": 0, "gpu_limit": 8, "provisioner": "karpenter"},
                  {"pods": 2, "gpus_per_pod": 8, "duration_s": 600}, days=0.1)
    assert run["tenants"][0]["wait_max_s"] == pytest.approx(0.1 * 86400)  # 16 GPUs never fit an 8-GPU limit


def endpoint_run(**over) -> dict:
    ep = {"name": "e", "tenant": "t", "pool": "p", "min_replicas": 0, "cooldown_s": 300, "model_load_s": 60,
          "capacity_rps": 5, "traffic": {"hourly_rps": [0.0] * 24}}
    ep.update(over)
    data = {"days": 1, "fleet": {"node_pools": [{"name": "p", "flavor": "h100", "nodes": 0, "gpu_limit": 16,
                                                  "consolidate_after_s": 60}]},
            "tenants": [{"name": "t"}], "endpoints": [ep]}
    return simulate(parse_scenario(data), seed=0)


def test_no_traffic_scales_to_zero_and_a_prewarm_window_keeps_one_replica():
    assert endpoint_run()["endpoints"][0]["replica_hours"] == 0.0
    warm = endpoint_run(prewarm=[{"start_hour": 8, "end_hour": 18, "replicas": 1}])["endpoints"][0]
    # 10 h window; the replica exists from the first poll after 08:00 (+ node and model load) to the
    # first poll after 18:00 + cooldown.
    assert 9.9 <= warm["replica_hours"] <= 10.2


def test_cold_start_waits_for_node_and_model_then_times_out():
    # 1 rps from hour 3 on with min 0: the first requests wait for a node (45-60 s) and the model (60 s),
    # longer than the 30-s timeout, so they are dropped.
    traffic = {"hourly_rps": [0.0, 0.0, 0.0] + [1.0] * 21}
    ep = endpoint_run(timeout_s=30, traffic=traffic)["endpoints"][0]
    assert ep["requests_dropped"] >= 80  # ~105-120 s of 1 rps lost at the cold start
    assert ep["requests_served"] > 0.99 * (ep["requests"] - ep["requests_dropped"]) - 5


def test_duty_cycle_saturates_whatever_the_backlog():
    ep = Endpoint("e", "t", "p", signal="duty-cycle", target=0.8)
    assert desired_replicas(ep, ready=4, waiting=10, duty=1.0, kv=0) == desired_replicas(
        ep, ready=4, waiting=1000, duty=1.0, kv=0) == 5
    q = Endpoint("e", "t", "p", signal="queue-depth", target=10)
    assert desired_replicas(q, ready=4, waiting=1000, duty=1.0, kv=0) == 100
