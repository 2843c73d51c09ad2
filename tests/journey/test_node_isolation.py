"""Review 2, N3: a tenant's pods choose no nodes that are not theirs. vCluster copies the virtual pod's
tolerations, nodeSelector and affinity to the host pod (steps/vcluster_sync.translate), so these journeys
run the attacks through the real rendered fleet and the tenant namespace's Kyverno Policies
(tenants.isolation.nodes), and check that the tenants' own pods still pass."""

from __future__ import annotations

import copy
from dataclasses import replace
from decimal import Decimal
from typing import Any

import pytest

from scheduling.inputs import EndpointSpec
from tenants.render import render_tenant

from . import runner, workloads
from .fleet import TRUST, context, view
from .steps import kyverno, vcluster_sync

NS = {slug: f"tenant-{slug}" for slug in TRUST}
DEDICATED = "gpufleet.io/dedicated-tenant"
SHARED = ("acme", "beta")  # trusted and standard: no nodes of their own
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def cpu_pod(**spec: Any) -> dict[str, Any]:
    """A pod without GPU resources (a web server, a batch step), with `spec` fields added."""
    pod = workloads.pod("web-0", limits={"cpu": "1", "memory": "1Gi"}, labels={"app": "web"})
    pod["spec"].update(copy.deepcopy(spec))
    return pod


def required(key: str, operator: str, values: list[str] | None = None) -> dict[str, Any]:
    expression: dict[str, Any] = {"key": key, "operator": operator, **({"values": values} if values else {})}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [expression]}]}}}


def refused(journey: runner.Journey, rule: str, *phrases: str) -> None:
    assert journey.refusal is not None, journey
    step, reason = journey.refusal
    assert step == "kyverno-validate", journey
    assert journey.step("kyverno-validate").facts["rule"] == rule
    for phrase in phrases:
        assert phrase in reason, reason


@pytest.mark.parametrize("slug", SHARED)
@pytest.mark.parametrize("toleration", [
    {"key": DEDICATED, "operator": "Exists", "effect": "NoSchedule"},
    {"key": DEDICATED, "operator": "Equal", "value": "gamma", "effect": "NoSchedule"},
    {"key": DEDICATED, "operator": "Equal", "value": "gamma"},
])
def test_a_shared_tenants_pod_cannot_tolerate_the_untrusted_tenants_nodes(fleet, slug, toleration) -> None:
    """N3 (a): tolerating `gpufleet.io/dedicated-tenant` and selecting `gamma` would put the pod on (or make
    Karpenter launch) the untrusted tenant's nodes; refused at creation, a CPU pod and a GPU pod alike."""
    for pod in (cpu_pod(), workloads.inference_pod("whole")):
        pod["spec"].update(tolerations=[toleration], nodeSelector={DEDICATED: "gamma"})
        refused(runner.run(pod, NS[slug], fleet), "no-foreign-dedicated-tolerations",
                "spec.tolerations", f"tenant {slug} may not tolerate the {DEDICATED} taint", "(allowed: none)")


@pytest.mark.parametrize("slug", sorted(TRUST))
def test_a_toleration_of_every_taint_is_refused(fleet, slug) -> None:
    """A toleration without a key and `Exists` tolerates every taint, the dedicated ones included."""
    journey = runner.run(cpu_pod(tolerations=[{"operator": "Exists"}]), NS[slug], fleet)
    refused(journey, "no-foreign-dedicated-tolerations", "nor every taint (a toleration without a key)")


@pytest.mark.parametrize("slug", SHARED)
@pytest.mark.parametrize("choice", [
    {"nodeSelector": {DEDICATED: "gamma"}},
    {"affinity": required(DEDICATED, "In", ["gamma"])},
    {"affinity": required(DEDICATED, "Exists")},
])
def test_a_shared_tenant_cannot_select_dedicated_nodes(fleet, slug, choice) -> None:
    journey = runner.run(cpu_pod(**choice), NS[slug], fleet)
    refused(journey, "no-foreign-dedicated-nodes", "spec.nodeSelector / spec.affinity.nodeAffinity",
            f"may not select {DEDICATED} nodes of another tenant")


def test_the_untrusted_tenant_cannot_reach_another_dedicated_tenants_nodes(fleet) -> None:
    """Its own placement passes; another value of the key, or `Exists` (any tenant's), does not."""
    other = {"key": DEDICATED, "operator": "Equal", "value": "delta", "effect": "NoSchedule"}
    journey = runner.run(cpu_pod(tolerations=[other]), NS["gamma"], fleet)
    refused(journey, "no-foreign-dedicated-tolerations", f"(allowed: only {DEDICATED}=gamma")
    for operator, values in (("In", ["gamma", "delta"]), ("Exists", None)):
        journey = runner.run(cpu_pod(affinity=required(DEDICATED, operator, values)), NS["gamma"], fleet)
        refused(journey, "no-foreign-dedicated-nodes", f"(allowed: only {DEDICATED}=gamma")


def test_the_untrusted_tenants_own_pods_run_on_its_own_nodes(fleet, chart_defaults) -> None:
    """Its synced pods carry the toleration and selector its vCluster adds; repeating them (or naming its
    own nodes in an affinity) is harmless, and a selector naming another tenant is overwritten by the
    syncer's (the pod stays on gamma's nodes)."""
    own = {"key": DEDICATED, "operator": "Equal", "value": "gamma", "effect": "NoSchedule"}
    for pod in (cpu_pod(), cpu_pod(tolerations=[own], affinity=required(DEDICATED, "In", ["gamma"])),
                cpu_pod(nodeSelector={DEDICATED: "acme"})):
        journey = runner.run(pod, NS["gamma"], fleet)
        assert journey.ok, journey
        assert journey.pod["spec"]["nodeSelector"][DEDICATED] == "gamma"
        assert journey.step("scheduler").facts["node_pool"] == "cpu-gamma"
    gpu = workloads.training_pod("whole")
    gpu["spec"]["tolerations"] = [dict(GPU_TOLERATION)]
    journey = runner.run(gpu, NS["gamma"], fleet)
    assert journey.ok, journey
    assert journey.step("scheduler").facts["node_pool"] == "pool-h100-gamma"


@pytest.mark.parametrize("slug", sorted(TRUST))
@pytest.mark.parametrize("choice", [
    {"tolerations": [GPU_TOLERATION], "nodeSelector": {"gpufleet.io/gpu-mode": "whole"}},
    {"tolerations": [GPU_TOLERATION], "nodeSelector": {"gpufleet.io/gpu-mode": "hami"}},
    {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "true"}]},
    {"nodeSelector": {"gpufleet.io/flavor": "h100"}},
    {"affinity": required("gpufleet.io/gpu-mode", "In", ["whole"])},
])
def test_a_pod_without_a_gpu_request_cannot_reach_gpu_nodes(fleet, slug, choice) -> None:
    """N3 (b): no GPU resource means no Kueue and no GPU quota; on a GPU node such a pod would use GPUs
    outside both. Refused with the fields and the reason."""
    journey = runner.run(cpu_pod(**choice), NS[slug], fleet)
    refused(journey, "gpu-nodes-need-a-gpu-request", "a pod that requests no GPU resource may not tolerate the "
            "nvidia.com/gpu taint nor select gpufleet.io/gpu-mode or gpufleet.io/flavor nodes")


@pytest.mark.parametrize(("slug", "mode"), [("acme", "whole"), ("acme", "mig"), ("acme", "hami"),
                                            ("beta", "whole"), ("beta", "mig"), ("gamma", "whole")])
def test_gpu_pods_may_tolerate_the_gpu_taint_and_name_their_nodes(fleet, slug, mode) -> None:
    """The tenant's GPU pods of every allowed mode, with the GPU toleration and their own mode's selector
    written by the tenant, still pass and are admitted in their flavor."""
    pod = workloads.inference_pod(mode)
    pod["spec"].update(tolerations=[dict(GPU_TOLERATION)], nodeSelector={"gpufleet.io/gpu-mode": mode})
    journey = runner.run(pod, NS[slug], fleet)
    assert journey.ok, journey
    assert journey.step("kueue-admission").facts["admitted"]


@pytest.mark.parametrize("slug", sorted(TRUST))
def test_pods_without_node_choices_pass(fleet, chart_defaults, slug) -> None:
    """A CPU pod with no tolerations or node choices, and the vCluster's own CoreDNS and control plane."""
    assert runner.run(cpu_pod(), NS[slug], fleet).ok
    assert runner.run(vcluster_sync.coredns_pod(NS[slug], fleet, chart_defaults), NS[slug], fleet).ok
    assert runner.run_host(vcluster_sync.control_plane_pod(NS[slug], fleet, chart_defaults), fleet).ok


@pytest.mark.parametrize("slug", sorted(TRUST))
@pytest.mark.parametrize("where", ["containers", "initContainers"])
@pytest.mark.parametrize("gpu", [False, True])
def test_the_tenant_cannot_name_gpu_devices_in_the_environment(fleet, slug, where, gpu) -> None:
    """NVIDIA_VISIBLE_DEVICES=all would give the container every GPU of its node under the container
    toolkit's default (docs/compatibility.md, N3); a GPU pod gets its devices from the device plugin."""
    pod = workloads.inference_pod("whole") if gpu else cpu_pod()
    container = pod["spec"]["containers"][0]
    if where == "initContainers":
        container = {"name": "init", "image": container["image"], "securityContext": dict(workloads.SECURE)}
        pod["spec"]["initContainers"] = [container]
    container["env"] = [{"name": "HOME", "value": "/tmp"}, {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
    refused(runner.run(pod, NS[slug], fleet), "no-gpu-device-env",
            "spec.containers[].env / spec.initContainers[].env: NVIDIA_VISIBLE_DEVICES may not be set")


def _endpoint() -> EndpointSpec:
    return EndpointSpec(name="chat", model="meta-llama/Llama-3.1-8B-Instruct", deployment="chat", tier="standard",
                        min_replicas=0, max_replicas=2, cooldown_seconds=300, polling_seconds=30,
                        prewarm_start="", prewarm_end="", prewarm_replicas=0, queue_target=5,
                        kv_cache_target=Decimal("0.8"))


@pytest.mark.parametrize("slug", sorted(TRUST))
def test_the_platforms_vllm_endpoint_pods_pass(fleet, slug) -> None:
    """The platform's own serving Deployment in the tenant namespace (not synced: the placement is set by
    scheduling.endpoints) passes the tenant's policies: its env names no device, its toleration is its own."""
    ctx = context()
    base = view(slug, ctx.extra["scheduling"])
    sched = replace(base.scheduling, endpoints=(_endpoint(),))
    fleet.tenants[slug] = render_tenant(replace(base, scheduling=sched), ctx)
    (deployment,) = fleet.objects("Deployment", NS[slug])
    template = deployment["spec"]["template"]
    pod = vcluster_sync.api_defaults({"apiVersion": "v1", "kind": "Pod", "spec": copy.deepcopy(template["spec"]),
                                      "metadata": {**template["metadata"], "name": "chat-0", "namespace": NS[slug]}})
    journey = runner.run_host(pod, fleet, [("kyverno-mutate", kyverno.mutate), ("kyverno-validate", kyverno.validate)])
    assert journey.ok, journey
    assert (DEDICATED in journey.pod["spec"].get("nodeSelector", {})) == (slug == "gamma")


@pytest.mark.parametrize("slug", sorted(TRUST))
def test_a_pod_cannot_name_its_node(fleet, slug) -> None:
    """`spec.nodeName` binds without the scheduler, so no NoSchedule taint keeps the pod off a node."""
    refused(runner.run(cpu_pod(nodeName="gpu-node-of-gamma"), NS[slug], fleet), "no-node-name", "spec.nodeName")


@pytest.mark.parametrize("slug", SHARED)
@pytest.mark.parametrize("added, rule", [
    ({"key": DEDICATED, "operator": "Exists", "effect": "NoSchedule"}, "no-foreign-dedicated-tolerations"),
    (GPU_TOLERATION, "gpu-nodes-need-a-gpu-request"),
])
def test_a_toleration_added_to_a_running_pod_is_refused(fleet, slug, added, rule) -> None:
    """Review 2 re-check of N3: Kubernetes lets an UPDATE add tolerations to an existing pod, and vCluster copies
    the virtual pod's tolerations to the host pod on every sync. A pod created compliant (say with a node-pool
    selector the creation rules do not name) must not get the toleration that opens those nodes afterwards."""
    created = cpu_pod(nodeSelector={"karpenter.sh/nodepool": "cpu-gamma"})
    journey = runner.run(created, NS[slug], fleet)
    assert journey.step("kyverno-validate").ok, journey  # admitted; it waits, Pending, for a node it may reach
    assert journey.refusal is not None and journey.refusal[0] == "scheduler", journey
    updated = copy.deepcopy(journey.step("kyverno-validate").pod)
    updated["spec"]["tolerations"] = [*updated["spec"].get("tolerations", []), added]
    policy = next(p for p in fleet.objects("Policy", NS[slug]) if p["metadata"]["name"] == "gpufleet-node-isolation")
    decision = kyverno.kyverno_eval.admit(policy, updated, operation="UPDATE")
    assert not decision.allowed and decision.rule == rule, decision


@pytest.mark.parametrize("slug", sorted(TRUST))
def test_kueues_admission_update_and_finalizer_removal_pass(fleet, slug) -> None:
    """What Kueue does by UPDATE to a GPU pod -- its flavor's tolerations at admission, its finalizer gone at the
    end (the pod then carries the nodeName it was bound to) -- passes every rule that sees UPDATE."""
    journey = runner.run(workloads.inference_pod("whole"), NS[slug], fleet)
    pod = copy.deepcopy(journey.trace[0][1].pod)
    pod["spec"]["tolerations"] = [*pod["spec"].get("tolerations", []), GPU_TOLERATION]
    pod["spec"]["nodeName"] = "node-1"
    pod["metadata"]["finalizers"] = []
    for policy in fleet.objects("Policy", NS[slug]):
        decision = kyverno.kyverno_eval.admit(policy, pod, operation="UPDATE")
        assert decision.allowed, (policy["metadata"]["name"], decision)
