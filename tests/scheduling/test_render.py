"""Every rendered scheduling object validates against the strict upstream CRDs; trust levels decide
which flavors a ClusterQueue covers; the numbers in Kueue and KAI agree."""

from __future__ import annotations

import copy

import pytest

from infra.manifests import to_yaml_stream
from scheduling import actions
from scheduling.render import KUEUE
from tenants.backends import get_schema_registry
from tenants.reconcile import desired_manifests
from tenants.render import RenderContext, render_platform
from tests.support.services import need_reference

pytestmark = pytest.mark.django_db


def by_kind(manifests: list[dict], kind: str, api_prefix: str = "") -> list[dict]:
    return [m for m in manifests if m["kind"] == kind and m["apiVersion"].startswith(api_prefix)]


def covered(cluster_queue: dict) -> set[str]:
    """The GPU resources a queue covers (every queue also covers cpu/memory, in a group of their own)."""
    groups = cluster_queue["spec"]["resourceGroups"]
    assert groups[-1]["coveredResources"] == ["cpu", "memory"]
    return {r for group in groups[:-1] for r in group["coveredResources"]}


def test_three_trust_levels_and_three_tiers_render_and_validate(fleet, tenants) -> None:
    need_reference()
    actions.create_cohort("research")
    actions.create_cohort("research-vision", parent="research", fair_sharing_weight="0.5")
    actions.create_node_pool("h100-pool", flavor="h100", gpu_limit=8, instance_types=["p5.48xlarge"])
    actions.set_tenant_scheduling(tenants["trusted"], cohort="research", fair_sharing_weight="2",
                                  priority_class="high")
    actions.set_quota(tenants["untrusted"], flavor="h100", nominal=4, borrowing_limit=2, lending_limit=1)
    actions.set_quota(tenants["standard"], flavor="h100-3g", nominal=7)
    actions.set_quota(tenants["trusted"], flavor="h100-quarter", nominal=8, borrowing_limit=4)
    for tier in ("critical", "standard", "batch"):
        actions.create_endpoint(tenants["trusted"], f"llm-{tier}", model="meta-llama/Llama-3.1-8B", tier=tier)
    registry = get_schema_registry()
    platform = render_platform(RenderContext.from_settings())
    everything = list(platform)
    for tenant in tenants.values():
        everything.extend(desired_manifests(tenant))
    assert registry.validate(everything) == []
    kinds = {m["kind"] for m in everything}
    assert {"ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass",
            "Queue", "NodePool", "ScaledObject"} <= kinds
    # No topology levels by default, and never a Kueue Topology (issue 26, B1): nothing at all.
    assert by_kind(everything, "Topology") == []
    cohorts = {m["metadata"]["name"]: m["spec"] for m in by_kind(everything, "Cohort")}
    # Kueue runs classical preemption by default: no fairSharing.weight (it would do nothing).
    assert cohorts["research-vision"] == {"parentName": "research"}
    assert set(cohorts) == {"gpufleet", "research", "research-vision"}
    kai_parents = {m["metadata"]["name"]: m["spec"].get("parentQueue") for m in by_kind(everything, "Queue")}
    assert kai_parents["cohort-research-vision"] == "cohort-research"
    assert kai_parents["tenant-t-trusted"] == "cohort-research"
    scaled = {m["metadata"]["name"]: m["spec"] for m in by_kind(everything, "ScaledObject")}
    assert scaled["endpoint-llm-critical"]["minReplicaCount"] == 1
    assert scaled["endpoint-llm-standard"]["minReplicaCount"] == 0
    assert [t["type"] for t in scaled["endpoint-llm-standard"]["triggers"]] == ["prometheus", "prometheus", "cron"]
    assert scaled["endpoint-llm-batch"]["cooldownPeriod"] == 3600
    assert "vllm:num_requests_waiting" in scaled["endpoint-llm-batch"]["triggers"][0]["metadata"]["query"]
    assert "vllm:kv_cache_usage_perc" in scaled["endpoint-llm-batch"]["triggers"][1]["metadata"]["query"]
    assert scaled["endpoint-llm-batch"]["triggers"][1]["metadata"]["threshold"] == "0.8"
    # A total is divided by the per-replica target; an average is compared to it (HPA Value).
    assert [t.get("metricType") for t in scaled["endpoint-llm-batch"]["triggers"]] == ["AverageValue", "Value", None]
    assert scaled["endpoint-llm-batch"]["triggers"][2]["type"] == "cron"  # the nightly window wakes it
    # Deterministic: same rows, byte-identical YAML.
    assert to_yaml_stream(desired_manifests(tenants["trusted"])) == to_yaml_stream(
        desired_manifests(tenants["trusted"]))


def test_untrusted_covers_no_mig_or_hami_trusted_may(fleet, tenants) -> None:
    queues = {level: by_kind(desired_manifests(t), "ClusterQueue")[0] for level, t in tenants.items()}
    assert covered(queues["untrusted"]) == {"nvidia.com/gpu"}
    flavors = {f["name"] for g in queues["untrusted"]["spec"]["resourceGroups"][:-1] for f in g["flavors"]}
    assert flavors == {"h100"}
    assert covered(queues["standard"]) == {"nvidia.com/gpu", "nvidia.com/mig-3g.40gb"}
    assert covered(queues["trusted"]) == {"nvidia.com/gpu", "nvidia.com/mig-3g.40gb", "nvidia.com/gpucores",
                                          "nvidia.com/gpumem-percentage"}
    for queue in queues.values():
        assert "cohort" not in queue["spec"] and queue["spec"]["cohortName"] == "gpufleet"
        assert queue["spec"]["preemption"]["withinClusterQueue"] == "LowerPriority"


def test_kueue_and_kai_carry_the_same_numbers(fleet, tenants) -> None:
    tenant = tenants["trusted"]
    actions.set_quota(tenant, flavor="h100", nominal=2, borrowing_limit=1, lending_limit=1)
    actions.set_quota(tenant, flavor="h100-3g", nominal=7, borrowing_limit=0)
    actions.set_quota(tenant, flavor="h100-quarter", nominal=4, borrowing_limit=4)
    manifests = desired_manifests(tenant)
    queue = by_kind(manifests, "ClusterQueue")[0]
    gpu_group = next(g for g in queue["spec"]["resourceGroups"] if "nvidia.com/gpu" in g["coveredResources"])
    whole = next(f for f in gpu_group["flavors"] if f["name"] == "h100")["resources"]
    assert whole[0] == {"name": "nvidia.com/gpu", "nominalQuota": 2, "borrowingLimit": 1, "lendingLimit": 1}
    # A whole GPU lists HAMi's percentages with zero quota (Kueue: every flavor lists every covered resource).
    assert {r["name"]: r["nominalQuota"] for r in whole[1:]} == {"nvidia.com/gpucores": 0,
                                                                   "nvidia.com/gpumem-percentage": 0}
    quarter = next(f for f in gpu_group["flavors"] if f["name"] == "h100-quarter")["resources"]
    assert {r["name"]: r["nominalQuota"] for r in quarter} == {
        "nvidia.com/gpu": 4, "nvidia.com/gpucores": 100, "nvidia.com/gpumem-percentage": 100}
    kai = next(m for m in manifests if m["kind"] == "Queue")
    # KAI's units: a whole GPU is 1, a 3g MIG instance 3 (KAI sums MIG slices), HAMi is not KAI's:
    # 2 x 1 + 7 x 3 = 23; limit (2 + 1) x 1 + (7 + 0) x 3 = 24.
    assert kai["spec"]["resources"]["gpu"]["quota"] == 23
    assert kai["spec"]["resources"]["gpu"]["limit"] == 24
    assert kai["spec"]["parentQueue"] == "cohort-gpufleet"
    assert kai["spec"]["priority"] == 500


def test_v1beta1_cohort_field_fails_validation(fleet, tenants) -> None:
    need_reference()
    queue = by_kind(desired_manifests(tenants["standard"]), "ClusterQueue")[0]
    legacy = copy.deepcopy(queue)
    legacy["spec"]["cohort"] = legacy["spec"].pop("cohortName")
    problems = get_schema_registry().validate([legacy])
    assert problems and "cohort" in str(problems[0])
    assert get_schema_registry().validate([queue]) == []
    assert queue["apiVersion"] == KUEUE


def test_node_pool_defaults_and_override_warning(fleet) -> None:
    need_reference()
    pool = actions.create_node_pool("gpu-a", flavor="h100", gpu_limit=16)
    assert pool.warnings == []
    with pytest.raises(actions.ActionError) as err:
        actions.create_node_pool("gpu-b", flavor="h100", gpu_limit=16, consolidation_policy="WhenEmptyOrUnderutilized")
    assert "consolidation_policy" in err.value.errors
    risky = actions.create_node_pool("gpu-b", flavor="h100", gpu_limit=16,
                                     consolidation_policy="WhenEmptyOrUnderutilized", allow_underutilized=True)
    assert risky.warnings and "evict" in risky.warnings[0]
    platform = render_platform(RenderContext.from_settings())
    pools = {m["metadata"]["name"]: m for m in platform if m["kind"] == "NodePool"}
    assert pools["gpu-a"]["spec"]["disruption"] == {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "1h"}
    assert pools["gpu-a"]["spec"]["template"]["spec"]["taints"][0] == {
        "key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
    assert pools["gpu-b"]["spec"]["disruption"]["consolidationPolicy"] == "WhenEmptyOrUnderutilized"
    assert get_schema_registry().validate(list(pools.values())) == []
    # Node pools add fleet capacity: 16 entered + 2 pools x 16 GPUs.
    assert actions.effective_capacity(fleet["whole"]) == 48


def test_isolation_policy_narrows_queue_coverage_and_quota_writes(fleet, tenants) -> None:
    """A platform admin tightens a trusted tenant to whole GPUs (isolation app): its ClusterQueue
    drops the MIG and HAMi flavors and new MIG quota is refused on the `flavor` field."""
    from tenants.isolation import actions as isolation

    isolation.set_tenant_isolation(tenants["trusted"], allowed_modes=["whole"])
    queue = by_kind(desired_manifests(tenants["trusted"]), "ClusterQueue")[0]
    assert covered(queue) == {"nvidia.com/gpu"}
    with pytest.raises(actions.ActionError) as err:
        actions.set_quota(tenants["trusted"], flavor="h100-3g", nominal=1)
    assert "flavor" in err.value.errors


def test_tenant_loader_query_count_does_not_grow(fleet, tenants, django_assert_max_num_queries) -> None:
    from scheduling.inputs import load_tenant

    tenant = tenants["trusted"]
    for flavor in ("h100", "h100-3g", "h100-quarter"):
        actions.set_quota(tenant, flavor=flavor, nominal=1)
    for tier in ("critical", "standard", "batch"):
        actions.create_endpoint(tenant, f"e-{tier}", model="m", tier=tier)
    with django_assert_max_num_queries(6):  # settings, quotas, endpoints, placements + the isolation policy's two
        load_tenant(tenant)


def test_default_tiers_and_priorities_survive_an_emptied_table(fleet, tenants) -> None:
    """Transactional tests (and hand cleanups) empty the seeded tables; 'standard' still works."""
    from scheduling.models import PriorityClass, SlaTier

    SlaTier.objects.all().delete()
    PriorityClass.objects.all().delete()
    platform = render_platform(RenderContext.from_settings())
    assert {m["metadata"]["name"] for m in platform if m["kind"] == "WorkloadPriorityClass"} == {
        "low", "standard", "high"}
    endpoint = actions.create_endpoint(tenants["standard"], "chat", model="m", tier="standard")
    assert endpoint.tier.min_replicas == 0
    actions.set_tenant_scheduling(tenants["standard"], priority_class="high")
    assert SlaTier.objects.count() == 3 and PriorityClass.objects.count() == 3


def test_fair_sharing_setting_switches_weight_and_borrow_within_cohort(fleet, tenants, settings) -> None:
    """fairSharing.weight only with Kueue's fair sharing on; borrowWithinCohort only with it off."""
    actions.create_cohort("research")
    actions.set_tenant_scheduling(tenants["trusted"], cohort="research", fair_sharing_weight="2")
    off = by_kind(desired_manifests(tenants["trusted"]), "ClusterQueue")[0]["spec"]
    assert "fairSharing" not in off and off["preemption"]["borrowWithinCohort"]["policy"] == "LowerPriority"
    settings.GPUFLEET_KUEUE_FAIR_SHARING = True
    on = by_kind(desired_manifests(tenants["trusted"]), "ClusterQueue")[0]["spec"]
    assert on["fairSharing"] == {"weight": "2"} and "borrowWithinCohort" not in on["preemption"]
    cohorts = {m["metadata"]["name"]: m["spec"] for m in render_platform(RenderContext.from_settings())
               if m["kind"] == "Cohort"}
    assert cohorts["research"] == {"fairSharing": {"weight": "1"}}
    need_reference()
    assert get_schema_registry().validate([by_kind(desired_manifests(tenants["trusted"]), "ClusterQueue")[0]]) == []


def test_every_gpu_flavor_pool_and_gpu_pod_carries_its_mode(fleet, tenants) -> None:
    """Issue 26 F3: Kueue skips a flavor whose nodeLabels differ from the pod's nodeSelector on a key the flavor
    defines, so the mode label must be on every GPU ResourceFlavor (never on gpufleet-host, which must match
    every pod), on each GPU pool's nodes, and set on GPU pods by the routing policy -- one rule per mode."""
    from tests.isolation import kyverno_eval

    actions.create_node_pool("h100-quarter-pool", flavor="h100-quarter", gpu_limit=8)
    platform = render_platform(RenderContext.from_settings())
    flavors = {m["metadata"]["name"]: m["spec"] for m in by_kind(platform, "ResourceFlavor")}
    assert {name: spec.get("nodeLabels", {}).get("gpufleet.io/gpu-mode") for name, spec in flavors.items()} == {
        "h100": "whole", "h100-3g": "mig", "h100-quarter": "hami", "gpufleet-host": None}
    pool = by_kind(platform, "NodePool")[0]["spec"]["template"]["metadata"]["labels"]
    assert pool["gpufleet.io/gpu-mode"] == "hami"
    policy = next(m for m in desired_manifests(tenants["trusted"]) if m["metadata"]["name"] == "gpufleet-gpu-routing")
    ns = policy["metadata"]["namespace"]

    def mode_of(limits: dict, selector: dict | None = None) -> str | None:
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": ns},
               "spec": {**({"nodeSelector": selector} if selector else {}),
                        "containers": [{"name": "c", "resources": {"limits": limits}}]}}
        return kyverno_eval.mutate(policy, pod)[0]["spec"].get("nodeSelector", {}).get("gpufleet.io/gpu-mode")

    assert mode_of({"nvidia.com/gpu": 1}) == "whole"
    assert mode_of({"nvidia.com/gpu": 1}, {"gpufleet.io/gpu-mode": "hami"}) == "whole"  # the platform's, not yours
    assert mode_of({"nvidia.com/mig-3g.40gb": 1}) == "mig"
    assert mode_of({"nvidia.com/mig-3g.40gb": 1, "nvidia.com/gpu": 1}) == "mig"
    for share in ("nvidia.com/gpucores", "nvidia.com/gpumem", "nvidia.com/gpumem-percentage"):
        assert mode_of({"nvidia.com/gpu": 1, share: 25}) == "hami"
        assert mode_of({share: 25}) == "hami"  # HAMi's webhook adds nvidia.com/gpu: 1 later
    assert mode_of({"cpu": "1"}) is None  # non-GPU pods keep any node


def test_a_flavor_cannot_set_the_mode_label_itself(fleet) -> None:
    with pytest.raises(actions.ActionError) as err:
        actions.create_flavor("h100-odd", gpu_model="h100-80gb", mode="whole",
                              node_labels={"gpufleet.io/gpu-mode": "hami"})
    assert err.value.errors == {"node_labels": ["gpufleet.io/gpu-mode is set by the platform from the flavor's mode"]}
