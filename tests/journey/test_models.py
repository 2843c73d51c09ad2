"""The step models against upstream examples (shared/reference/.../examples), so each model is checked
against something it was not written from: Kueue's single-ClusterQueue setup, KAI's quickstart and
limited-queue examples, HAMi's example pods, and the Kyverno evaluator's mutate path."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from tests.isolation import kyverno_eval
from tests.support.services import need_reference

from .fleet import Fleet
from .steps import hami, kai, kueue, pss, vcluster_sync


def load(*parts: str) -> list[dict]:
    path = Path(need_reference(), *parts)
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def namespace(name: str, **labels: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def test_kueue_single_clusterqueue_example() -> None:
    """site/static/examples/admin/single-clusterqueue-setup.yaml (v0.19.2): cpu 9, memory 36Gi."""
    fleet = Fleet(platform=[*load("crds", "kueue", "examples", "single-clusterqueue-setup.yaml"),
                            namespace("default")], tenants={})
    pod = vcluster_sync.api_defaults({"kind": "Pod", "metadata": {
        "name": "sample-job", "namespace": "default", "labels": {kueue.QUEUE_LABEL: "user-queue"}},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "200Mi"}}}]}})
    gated = kueue.webhook(pod, fleet).pod
    # TopologyAwareScheduling is on by default at v0.19.2: the topology gate comes with the admission gate.
    assert gated["spec"]["schedulingGates"] == [{"name": kueue.GATE}, {"name": kueue.TOPOLOGY_GATE}]
    admitted = kueue.admit(gated, fleet)
    assert admitted.ok and admitted.facts["flavors"] == {"cpu": "default-flavor", "memory": "default-flavor"}
    assert admitted.pod["spec"]["schedulingGates"] == []
    big = copy.deepcopy(gated)
    big["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "10"
    assert kueue.admit(big, fleet).reason == (
        "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor default-flavor, "
        "previously considered podsets requests (0) + current podset request (10) > maximum capacity (9)")
    gpu = copy.deepcopy(gated)
    gpu["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "1"
    assert kueue.admit(gpu, fleet).reason.endswith("resource nvidia.com/gpu unavailable in ClusterQueue")
    stray = copy.deepcopy(gated)
    stray["metadata"]["labels"][kueue.QUEUE_LABEL] = "other"
    assert kueue.admit(stray, fleet).reason == "LocalQueue other doesn't exist"


def test_kueue_defaults_the_queue_only_where_a_default_localqueue_exists() -> None:
    queue = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
             "metadata": {"name": "default", "namespace": "team"}, "spec": {"clusterQueue": "cq"}}
    pod = {"kind": "Pod", "metadata": {"name": "p", "namespace": "team"}, "spec": {"containers": []}}
    assert kueue.webhook(pod, Fleet(platform=[queue], tenants={})).facts["managed"] is True
    assert kueue.webhook(pod, Fleet(platform=[], tenants={})).facts["managed"] is False


@pytest.mark.parametrize("example", ["default_use.yaml", "use_exclusive_card.yaml", "use_memory_fraction.yaml",
                                     "specify_card_type_to_use.yaml", "mig_example.yaml"])
def test_hami_webhook_on_upstream_example_pods(example: str) -> None:
    fleet = Fleet(platform=[namespace("ml"), namespace("quiet", **{"hami.io/webhook": "ignore"})], tenants={})
    pod = vcluster_sync.api_defaults({**load("dcgm", "hami-examples", example)[0]})
    pod["metadata"]["namespace"] = "ml"
    result = hami.webhook(pod, fleet)
    limits = result.pod["spec"]["containers"][0]["resources"]["limits"]
    if example == "mig_example.yaml":  # nvidia.com/mig-* is not HAMi's resourceName
        assert result.pod["spec"]["schedulerName"] == "default-scheduler"
        return
    assert result.pod["spec"]["schedulerName"] == hami.SCHEDULER
    original = pod["spec"]["containers"][0]["resources"]["limits"]
    if hami.CORES in original:
        assert limits[hami.CORES] == original[hami.CORES]
    elif "nvidia.com/gpumem" not in original and "nvidia.com/gpumem-percentage" not in original:
        assert limits[hami.CORES] == 100  # a bare nvidia.com/gpu becomes an exclusive HAMi card
    pod["metadata"]["namespace"] = "quiet"
    assert hami.webhook(pod, fleet).pod == pod
    pod["metadata"]["namespace"] = "ml"
    pod["spec"]["schedulerName"] = kai.SCHEDULER
    assert hami.webhook(pod, fleet).reason == "HAMi: pod already has different scheduler assigned"


def test_kai_limited_queue_example() -> None:
    """docs/priority/example/limited-queue.yaml (v0.13.0): queue `test` limited to 1 GPU under `default`."""
    fleet = Fleet(platform=load("crds", "kai-scheduler", "examples", "limited-queue.yaml"), tenants={})

    def pod(gpus: int) -> dict:
        return {"kind": "Pod", "metadata": {"name": "p", "namespace": "x", "labels": {kai.QUEUE_LABEL: "test"}},
                "spec": {"schedulerName": kai.SCHEDULER, "containers": [
                    {"name": "c", "resources": {"requests": {"nvidia.com/gpu": str(gpus), "cpu": "2"}}}]}}

    assert kai.admit(pod(1), fleet).facts["queues"] == ["test", "default"]
    assert kai.admit(pod(2), fleet).reason == "OverLimit: queue test gpu limit 1, the job requests 2"
    mig = pod(0)
    mig["spec"]["containers"][0]["resources"]["requests"] = {"nvidia.com/mig-1g.10gb": "1"}
    assert kai.admit(mig, fleet).ok
    mig["spec"]["containers"][0]["resources"]["requests"] = {"nvidia.com/mig-3g.40gb": "1"}
    assert not kai.admit(mig, fleet).ok  # 3 slices > limit 1


def test_kai_default_queues_example_have_no_limits() -> None:
    fleet = Fleet(platform=load("crds", "kai-scheduler", "examples", "default-queues.yaml"), tenants={})
    pod = {"kind": "Pod", "metadata": {"name": "p", "namespace": "x", "labels": {kai.QUEUE_LABEL: "default-queue"}},
           "spec": {"schedulerName": kai.SCHEDULER, "containers": [
               {"name": "c", "resources": {"requests": {"nvidia.com/gpu": "8", "cpu": "96", "memory": "1Ti"}}}]}}
    assert kai.admit(pod, fleet).facts["queues"] == ["default-queue", "default-parent-queue"]
    without_cpu = copy.deepcopy(fleet.platform)
    for queue in without_cpu:
        queue["spec"]["resources"].pop("cpu")
    assert "cpu limit 0" in kai.admit(pod, Fleet(platform=without_cpu, tenants={})).reason


def test_pod_security_restricted_accepts_the_documented_minimum_and_nothing_less() -> None:
    fleet = Fleet(platform=[namespace("r", **{"pod-security.kubernetes.io/enforce": "restricted"})], tenants={})
    sc = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": True,
          "seccompProfile": {"type": "RuntimeDefault"}}
    pod = {"kind": "Pod", "metadata": {"name": "p", "namespace": "r"},
           "spec": {"containers": [{"name": "c", "securityContext": sc}]}}
    assert pss.admit(pod, fleet).ok
    for key in sc:
        weaker = copy.deepcopy(pod)
        del weaker["spec"]["containers"][0]["securityContext"][key]
        assert not pss.admit(weaker, fleet).ok, key


def test_kyverno_mutate_merges_labels_and_replaces_scalars_in_rule_order() -> None:
    policy = {"kind": "Policy", "metadata": {"name": "p", "namespace": "n"}, "spec": {"rules": [
        {"name": "label", "match": {"any": [{"resources": {"kinds": ["Pod"], "operations": ["CREATE"]}}]},
         "mutate": {"patchStrategicMerge": {"metadata": {"labels": {"a": "1"}}}}},
        {"name": "only-with-a", "match": {"any": [{"resources": {"kinds": ["Pod"]}}]},
         "preconditions": {"all": [{"key": "{{ request.object.metadata.labels.a || '' }}", "operator": "AnyIn",
                                    "value": ["1"]}]},
         "mutate": {"patchStrategicMerge": {"spec": {"schedulerName": "s"}}}},
    ]}}
    pod = {"kind": "Pod", "metadata": {"name": "x", "namespace": "n", "labels": {"b": "2"}},
           "spec": {"schedulerName": "default-scheduler"}}
    mutated, rules = kyverno_eval.mutate(policy, pod)
    assert rules == ["label", "only-with-a"]
    assert mutated["metadata"]["labels"] == {"a": "1", "b": "2"} and mutated["spec"]["schedulerName"] == "s"
    assert kyverno_eval.mutate(policy, {**pod, "metadata": {**pod["metadata"], "namespace": "other"}})[1] == []
