"""Scenario validation names the field and the reason; the placement rules behind the presets."""

from __future__ import annotations

import pytest

from scheduling.simulator import ScenarioError, load_scenario, simulate
from scheduling.simulator.placement import Node, place_gang, place_pods

MINIMAL = """
fleet:
  node_pools: [{name: h100, flavor: h100, nodes: 1, provisioner: none}]
tenants: [{name: a, quotas: [{flavor: h100, nominal: 8}]}]
jobs: [{tenant: a, flavor: h100, submit_s: 0, pods: 2, gpus_per_pod: 4, duration_s: 3600}]
"""


def test_minimal_scenario_runs_one_job_for_an_hour():
    run = simulate(load_scenario(MINIMAL + "days: 0.5\n"), seed=0)
    assert run["tenants"][0]["jobs"] == 1
    assert run["tenants"][0]["gpu_hours"] == pytest.approx(8.0)
    assert run["fleet"]["allocation"] == pytest.approx(8 / 96, abs=1e-3)  # 8 GPU-h of 8 GPUs x 12 h


@pytest.mark.parametrize(("text", "field"), [
    (MINIMAL.replace("nominal: 8", "nominal: -1"), "tenants[0].quotas[0].nominal"),
    (MINIMAL.replace("provisioner: none", "provisioner: magic"), "fleet.node_pools[0].provisioner"),
    (MINIMAL.replace("tenant: a,", "tenant: zz,"), "jobs[0].tenant"),
    (MINIMAL + "surprise: 1\n", "(root)"),
    ("fleet: [", "(file)"),
])
def test_bad_scenarios_name_the_field(text, field):
    with pytest.raises(ScenarioError) as err:
        load_scenario(text)
    assert err.value.field == field


def test_a_job_without_quota_waits_to_the_end():
    text = MINIMAL.replace("flavor: h100, nominal: 8", "flavor: h100, nominal: 4") + "days: 1\n"
    run = simulate(load_scenario(text), 0)
    assert run["tenants"][0]["wait_max_s"] == 86400.0  # 8 GPUs never fit a 4-GPU quota


def test_gang_respects_one_topology_domain():
    nodes = [Node(i, "p", 8, domain=i // 2, free=f) for i, f in enumerate([4, 0, 4, 4])]
    # 8 units over domain 0 (4 free) fail; domain 1 (4 + 4 free) holds them.
    plan = place_gang(nodes, 1, 2, 4, single_domain=True, max_nodes=0, spread=False, disruptible=False, now=0)
    assert plan is not None and {n.domain for n in plan} == {1}


def test_pod_by_pod_binds_what_fits_and_gang_binds_nothing():
    nodes = [Node(i, "p", 8, domain=i, free=f) for i, f in enumerate([3, 2, 2])]
    assert place_gang(nodes, 1, 8, 1, single_domain=False, max_nodes=2, spread=False, disruptible=False, now=0) is None
    assert sum(n.free for n in nodes) == 7
    assert len(place_pods(nodes, 2, 8, 1, spread=False, disruptible=False, now=0)) == 7
    assert sum(n.free for n in nodes) == 0
