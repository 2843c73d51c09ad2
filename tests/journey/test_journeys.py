"""Every pod's journey through the REAL rendered three-tenant fleet (tests/journey/fleet.py): trust level
x GPU mode x workload kind, from the tenant's virtual cluster to the scheduler that binds it.

Each defect of issue 15 this branch fixes has a journey here that fails on the rendering before the fix
(the test names say which)."""

from __future__ import annotations

import pytest

from . import runner, workloads
from .fleet import PATCHED_SYNCER, TRUST, render_fleet
from .steps import kai, kueue, limitrange, vcluster_sync

NS = {slug: f"tenant-{slug}" for slug in TRUST}
ALLOWED = {"acme": ("whole", "mig", "hami"), "beta": ("whole", "mig"), "gamma": ("whole",)}
FLAVOR = {"whole": "h100", "mig": "h100-3g", "hami": "h100-quarter"}
UNIT = {"whole": "nvidia.com/gpu", "mig": "nvidia.com/mig-3g.40gb", "hami": "nvidia.com/gpu"}
SCHEDULER = {"whole": "kai-scheduler", "mig": "kai-scheduler", "hami": "hami-scheduler"}
MATRIX = [(slug, mode) for slug in TRUST for mode in ("whole", "mig", "hami")]
KINDS = {"training": workloads.training_pod, "inference": workloads.inference_pod}


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize(("slug", "mode"), MATRIX)
def test_gpu_pod_journey(fleet, slug: str, mode: str, kind: str) -> None:
    """Defects 2, 3 and 8: allowed pods are gated, admitted in the right flavor and bound by KAI (whole,
    MIG) or HAMi (shares); other modes are refused by the tenant's policy with the reason."""
    journey = runner.run(KINDS[kind](mode), NS[slug], fleet)
    if mode not in ALLOWED[slug]:
        assert journey.refusal is not None, journey
        step, reason = journey.refusal
        assert step == "kyverno-validate", journey
        assert f"tenant {slug} (trust level {TRUST[slug]}) may use GPU allocation modes: " \
               f"{', '.join(ALLOWED[slug])}" in reason
        return
    assert journey.ok, journey
    assert journey.step("kueue-webhook").facts["managed"] is True
    admitted = journey.step("kueue-admission").facts
    assert admitted["admitted"] and admitted["cluster_queue"] == NS[slug]
    assert admitted["flavors"][UNIT[mode]] == FLAVOR[mode]
    assert admitted["flavors"]["cpu"] == admitted["flavors"]["memory"] == "gpufleet-host"
    assert admitted["group_size"] == (2 if kind == "training" else 1)
    bound = journey.step("scheduler").facts
    assert bound["scheduler"] == SCHEDULER[mode]
    assert bound["nodeSelector"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    # No GPU node exists: the pod is Unschedulable on the system node and Karpenter launches one of the
    # flavor's pool (the tenant's own copy for the untrusted tenant).
    pool = f"pool-{FLAVOR[mode]}" + ("-gamma" if slug == "gamma" else "")
    assert (bound["node"], bound["node_pool"]) == (None, pool)
    pod = journey.pod
    limits = pod["spec"]["containers"][0]["resources"]["limits"]
    if mode != "hami":
        # Never rewritten into a HAMi share (defect 3), queued in its own tenant's KAI queue (defect 8).
        assert "nvidia.com/gpucores" not in limits
        assert pod["metadata"]["labels"][kai.QUEUE_LABEL] == NS[slug]
        assert journey.step("kai-queue").facts["queues"] == [NS[slug], "cohort-gpufleet"]
    else:
        assert journey.step("kai-queue").facts == {"kai": False}
    if slug == "gamma":  # untrusted: only its dedicated nodes
        assert bound["nodeSelector"]["gpufleet.io/dedicated-tenant"] == "gamma"
        assert {"key": "gpufleet.io/dedicated-tenant", "operator": "Equal", "value": "gamma",
                "effect": "NoSchedule"} in bound["tolerations"]


@pytest.mark.parametrize("slug", sorted(TRUST))
def test_the_virtual_clusters_coredns_runs(fleet, chart_defaults, slug: str) -> None:
    """Defect 2 and issue 26 B4: the vCluster's own CoreDNS (rendered from vCluster's template and the tenant's
    values, steps/vcluster_sync.coredns_pod) passes Pod Security, never enters Kueue and gets a node: the
    system nodes for shared tenants, the untrusted tenant's own CPU pool (its pods must stay on its nodes)."""
    journey = runner.run(vcluster_sync.coredns_pod(NS[slug], fleet, chart_defaults), NS[slug], fleet)
    assert journey.ok, journey
    assert journey.step("pod-security").facts["level"] == ("restricted" if slug == "gamma" else "baseline")
    assert journey.step("kueue-webhook").facts["managed"] is False
    assert kueue.QUEUE_LABEL not in journey.pod["metadata"]["labels"]
    bound = journey.step("scheduler").facts
    assert bound["scheduler"] == "default-scheduler"
    assert (bound["node"], bound["node_pool"]) == ((None, "cpu-gamma") if slug == "gamma" else ("system-0", None))


def test_coredns_without_the_b4_values_is_refused_for_the_untrusted_tenant(fleet, chart_defaults) -> None:
    """Issue 26 B4 before the fix: vCluster's template gives CoreDNS no seccomp profile (template.go:223-231),
    `restricted` refuses it; and without a CPU pool no node takes a CPU pod of a dedicated tenant."""
    values = fleet.vcluster_values(NS["gamma"])
    values["controlPlane"].pop("coredns")
    refused = runner.run(vcluster_sync.coredns_pod(NS["gamma"], fleet, chart_defaults), NS["gamma"], fleet)
    assert refused.refusal[0] == "pod-security"
    assert 'seccompProfile (container "coredns" must set securityContext.seccompProfile.type' in refused.refusal[1]
    fleet.tenants["gamma"] = [m for m in fleet.tenants["gamma"] if m["metadata"]["name"] != "cpu-gamma"]
    values["controlPlane"]["coredns"] = {"security": {"podSecurityContext": {"seccompProfile": {
        "type": "RuntimeDefault"}}}}
    pending = runner.run(vcluster_sync.coredns_pod(NS["gamma"], fleet, chart_defaults), NS["gamma"], fleet)
    step, reason = pending.refusal
    assert step == "scheduler" and "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity" in reason
    assert "did not tolerate nvidia.com/gpu=true:NoSchedule" in reason


@pytest.mark.parametrize("slug", sorted(TRUST))
def test_vcluster_control_plane_starts(fleet, chart_defaults, slug: str) -> None:
    """Defects 2 and 4: the control plane passes its namespace's Pod Security level (`restricted` for
    the untrusted tenant) and is neither gated by Kueue nor routed to a GPU scheduler."""
    pod = vcluster_sync.control_plane_pod(NS[slug], fleet, chart_defaults)
    journey = runner.run_host(pod, fleet)
    assert journey.ok, journey
    assert journey.step("pod-security").facts["level"] == ("restricted" if slug == "gamma" else "baseline")
    assert journey.step("kueue-webhook").facts["managed"] is False
    assert journey.step("scheduler").facts["scheduler"] == "default-scheduler"


def test_chart_default_control_plane_violates_restricted(fleet, chart_defaults) -> None:
    """The PSS model is not vacuous: the chart's own defaults (root, no seccomp) are refused."""
    values = fleet.vcluster_values(NS["gamma"])
    values["controlPlane"]["statefulSet"].pop("security", None)
    values["controlPlane"]["distro"]["k8s"].pop("securityContext", None)
    journey = runner.run_host(vcluster_sync.control_plane_pod(NS["gamma"], fleet, chart_defaults), fleet)
    step, reason = journey.refusal
    assert step == "pod-security"
    assert 'violates PodSecurity "restricted:latest"' in reason and "runAsUser=0" in reason


def test_stock_syncer_gpu_pods_are_refused_loudly_at_shipped_defaults() -> None:
    """Issue 26 B3: with vCluster v0.36.1's own syncer (the shipped default) every GPU pod is refused at
    creation with the reason; none is created to be deleted by Kueue or to run outside quota."""
    fleet = render_fleet()
    for slug in TRUST:
        journey = runner.run(workloads.inference_pod("whole"), NS[slug], fleet)
        assert journey.refusal[0] == "kyverno-validate", journey
        assert "GPU pods are refused: this platform's vCluster 0.36.1 syncer removes Kueue's scheduling gates" \
            in journey.refusal[1]
        assert "GPUFLEET_VCLUSTER_SYNCER_IMAGE" in journey.refusal[1]


def test_a_gate_stripped_pod_is_stopped_and_deleted_by_kueue() -> None:
    """Issue 26 B3, why the refusal: without it the stock syncer strips the gate (diff.go:163) and Kueue stops
    the unadmitted pod and deletes it (reconciler.go:653-662, pod_controller.go:513-552); the backstop
    ResourceQuota still caps what a pod bound in between could hold."""
    fleet = render_fleet()
    for slug in TRUST:
        fleet.tenants[slug] = [m for m in fleet.tenants[slug] if m["metadata"]["name"] != "gpufleet-gpu-syncer-gates"]
    journey = runner.run(workloads.inference_pod("whole"), NS["gamma"], fleet)
    assert journey.step("vcluster-resync").facts == {"gates_stripped": True}
    stopped = journey.step("kueue-admission")
    assert not stopped.ok and stopped.facts == {"admitted": False, "deleted": True}
    assert {"type": "TerminationTarget", "status": "True", "reason": "NotAdmitted",
            "message": "Not admitted by cluster queue"} in stopped.pod["status"]["conditions"]
    fleet.used[NS["gamma"]] = {"requests.nvidia.com/gpu": 4}  # gamma: 4 whole GPUs, borrowing 0
    refused = runner.run(workloads.inference_pod("whole"), NS["gamma"], fleet)
    assert refused.refusal == ("resource-quota", 'pods "chat-7d9f-abcde-x-ml-x-vcluster" is forbidden: '
                               "exceeded quota: gpufleet-backstop, requested: requests.nvidia.com/gpu=1, "
                               "used: requests.nvidia.com/gpu=4, limited: requests.nvidia.com/gpu=4")


def test_a_syncer_with_the_gate_fix_keeps_kueue_in_charge() -> None:
    """Defect 1 remedy: with GPUFLEET_VCLUSTER_SYNCER_IMAGE (v0.36.1 + PR #4107) the gate survives."""
    fleet = render_fleet(vcluster_syncer_image=PATCHED_SYNCER)
    image = fleet.vcluster_values(NS["beta"])["controlPlane"]["statefulSet"]["image"]
    assert image == {"registry": "registry.example.com", "repository": "loft-sh/vcluster-pro",
                     "tag": "0.36.1-gates"}
    journey = runner.run(workloads.inference_pod("mig"), NS["beta"], fleet)
    assert journey.ok and "gates_stripped" not in journey.step("vcluster-resync").facts
    assert journey.step("kueue-admission").facts["admitted"] is True
    assert not [m for m in fleet.tenants["beta"] if m["metadata"]["name"] == "gpufleet-gpu-syncer-gates"]


def test_a_tenant_cannot_use_another_tenants_kai_queue(fleet) -> None:
    """Defect 8: the queue label is the namespace's, whatever the tenant wrote."""
    journey = runner.run(workloads.inference_pod("whole", **{kai.QUEUE_LABEL: "tenant-acme"}), NS["beta"], fleet)
    assert journey.ok, journey
    assert journey.pod["metadata"]["labels"][kai.QUEUE_LABEL] == "tenant-beta"


def test_kai_counts_mig_in_its_own_units_and_hami_not_at_all(fleet) -> None:
    """Defect 8: beta's 7 x 3g.40gb are 21 KAI GPUs (+2 whole); a 7-pod MIG gang fits, 8 do not.
    acme's KAI quota holds its whole GPUs and MIG slices only (HAMi shares are hami-scheduler's)."""
    full = runner.run(workloads.training_pod("mig", size=7), NS["beta"], fleet)
    assert full.ok, full
    queue = fleet.one("Queue", "tenant-beta")["spec"]["resources"]
    assert queue["gpu"]["quota"] == 2 * 1 + 7 * 3 and queue["gpu"]["limit"] == 23
    # Kueue alone would refuse an 8th MIG pod; KAI's limit is in step with it: 8 x 3 + nothing else > 23.
    bigger = {**full.pod, "metadata": {**full.pod["metadata"], "annotations": {
        **full.pod["metadata"]["annotations"], kueue.GROUP_COUNT: "8"}}}
    assert kai.admit(bigger, fleet).reason == "OverLimit: queue tenant-beta gpu limit 23, the job requests 24"
    acme = fleet.one("Queue", "tenant-acme")["spec"]["resources"]["gpu"]
    assert acme["quota"] == 2 * 1 + 2 * 3 and acme["limit"] == 4 * 1 + 2 * 3
    assert {m["metadata"]["name"]: set(m["spec"]["resources"]) for m in fleet.objects("Queue")}["cohort-gpufleet"] \
        == {"gpu", "cpu", "memory"}


def test_priority_classes_are_limited_to_the_tenants_entitlement(fleet) -> None:
    """Defect 10: beta (class `standard`) may label `low`/`standard`, not `high`."""
    label = kueue.PRIORITY_LABEL
    assert runner.run(workloads.inference_pod("mig", **{label: "low"}), NS["beta"], fleet).ok
    refused = runner.run(workloads.inference_pod("mig", **{label: "high"}), NS["beta"], fleet)
    assert refused.refusal[0] == "kyverno-validate"
    assert "tenant beta may use priority classes: low, standard" in refused.refusal[1]
    assert runner.run(workloads.inference_pod("whole", **{label: "high"}), NS["acme"], fleet).ok


def test_limit_range_neither_oom_kills_vllm_nor_rejects_big_training_pods(fleet) -> None:
    """Defect 10: no 1Gi default memory limit on a pod that sets none; a 96-CPU training pod passes."""
    host = vcluster_sync.translate(workloads.inference_pod("mig"), NS["beta"], fleet)
    assert "memory" not in limitrange.admit(host, fleet).pod["spec"]["containers"][0]["resources"]["limits"]
    big = vcluster_sync.translate(workloads.training_pod("mig", size=1, cpu="96"), NS["beta"], fleet)
    assert limitrange.admit(big, fleet).ok
    journey = runner.run(workloads.inference_pod("whole"), NS["beta"], fleet)
    assert journey.ok, journey
    assert "memory" not in journey.pod["spec"]["containers"][0]["resources"]["limits"]
    big = runner.run(workloads.training_pod("whole", size=1, cpu="96"), NS["beta"], fleet)
    assert big.ok, big


def test_a_whole_gpu_pod_of_a_hami_tenant_stays_whole(fleet) -> None:
    """Defect 3 for the trusted tenant (HAMi's webhook is active in its namespace): the pod names
    kai-scheduler before HAMi sees it, so HAMi leaves it alone."""
    journey = runner.run(workloads.inference_pod("whole"), NS["acme"], fleet)
    assert journey.step("hami-webhook").reason == "HAMi: pod already has different scheduler assigned"
    assert fleet.namespace(NS["acme"])["metadata"]["labels"].get("hami.io/webhook") is None
    for slug in ("beta", "gamma"):
        assert fleet.namespace(NS[slug])["metadata"]["labels"]["hami.io/webhook"] == "ignore"


MODE_LABEL = "gpufleet.io/gpu-mode"


def drop_mode_rules(fleet, slug: str) -> None:
    """The routing policy as it was before issue 26 F3: no rule sets the GPU-mode nodeSelector."""
    from scheduling.routing import gpu_mode_rules

    names = {r["name"] for r in gpu_mode_rules()}
    rules = fleet.one("Policy", "gpufleet-gpu-routing", NS[slug])["spec"]["rules"]
    rules[:] = [r for r in rules if r["name"] not in names]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_whole_gpu_pod_beyond_its_whole_quota_never_takes_the_hami_flavor(fleet, kind: str) -> None:
    """Issue 26 F3: acme may hold 4 whole GPUs (2 + 2 borrowed) and 8 HAMi vGPUs, all `nvidia.com/gpu` in one
    Kueue resource group. A 5-GPU pod (or a gang of 3 x 2) is whole: it waits, it never fits the HAMi flavor's
    quota, because the routing policy gives it `gpufleet.io/gpu-mode: whole` and Kueue skips h100-quarter,
    whose nodeLabels say `hami` (flavorassigner.go:1246-1253 @v0.19.2)."""
    pod = workloads.training_pod("whole", size=3) if kind == "training" else workloads.inference_pod("whole")
    pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = 2 if kind == "training" else 5
    journey = runner.run(pod, NS["acme"], fleet)
    assert journey.step("kyverno-mutate").pod["spec"]["nodeSelector"][MODE_LABEL] == "whole"
    step, reason = journey.refusal
    assert step == "kueue-admission", journey
    asked = 6 if kind == "training" else 5
    assert reason == ("couldn't assign flavors to pod set main: flavor h100-quarter doesn't match node affinity, "
                      f"insufficient quota for nvidia.com/gpu in flavor h100, previously considered podsets "
                      f"requests (0) + current podset request ({asked}) > maximum capacity (4)")
    # The same pod without the mode label (the rendering before the fix) was admitted on HAMi's quota.
    drop_mode_rules(fleet, "acme")
    before = runner.run(pod, NS["acme"], fleet)
    assert before.step("kueue-admission").facts["flavors"]["nvidia.com/gpu"] == "h100-quarter"


@pytest.mark.parametrize("memory", ["nvidia.com/gpumem", "nvidia.com/gpumem-percentage"])
def test_a_hami_pod_never_takes_the_whole_flavor(fleet, memory: str) -> None:
    """Issue 26 F3, the other way: a HAMi pod asking for `gpumem` (MiB: no ClusterQueue covers it, and Kueue runs
    with IgnoreUndeclared) looks like a whole GPU to Kueue and fit h100 first. With `gpu-mode: hami` it is
    admitted on h100-quarter, whichever of HAMi's memory resources it names."""
    pod = workloads.inference_pod("hami")
    limits = pod["spec"]["containers"][0]["resources"]["limits"]
    limits.pop("nvidia.com/gpucores")
    limits.pop("nvidia.com/gpumem-percentage")
    limits[memory] = 20000 if memory == "nvidia.com/gpumem" else 25
    journey = runner.run(pod, NS["acme"], fleet)
    assert journey.step("kyverno-mutate").pod["spec"]["nodeSelector"][MODE_LABEL] == "hami"
    assert journey.step("kueue-admission").facts["flavors"]["nvidia.com/gpu"] == "h100-quarter"
    if memory == "nvidia.com/gpumem-percentage":
        assert journey.ok, journey
        bound = journey.step("scheduler").facts
        assert (bound["scheduler"], bound["node_pool"]) == ("hami-scheduler", "pool-h100-quarter")
        return
    # MiB is not what HAMi flavors sell: the HAMi pool's NodeOverlay offers the percentages only, so Karpenter
    # launches no node for it (docs/tenant-guide.md asks for gpumem-percentage).
    assert journey.refusal[0] == "scheduler"
    assert "pool-h100-quarter: incompatible with all instance types: no capacity for nvidia.com/gpumem" \
        in journey.refusal[1]
    drop_mode_rules(fleet, "acme")
    before = runner.run(pod, NS["acme"], fleet)
    assert before.step("kueue-admission").facts["flavors"]["nvidia.com/gpu"] == "h100"


def test_a_tenant_cannot_choose_another_modes_nodes(fleet) -> None:
    """Issue 26 F3: the mode label is the platform's. A whole-GPU pod that names `gpu-mode: hami` itself is
    still whole (the rule overwrites the key), so it never reaches HAMi's flavor or nodes."""
    pod = workloads.inference_pod("whole")
    pod["spec"]["nodeSelector"] = {MODE_LABEL: "hami"}
    journey = runner.run(pod, NS["acme"], fleet)
    assert journey.ok, journey
    assert journey.pod["spec"]["nodeSelector"][MODE_LABEL] == "whole"
    assert journey.step("kueue-admission").facts["flavors"]["nvidia.com/gpu"] == "h100"
    assert journey.step("scheduler").facts["node_pool"] == "pool-h100"


def test_a_pod_mixing_gpu_modes_is_refused_by_kueue(fleet) -> None:
    """A MIG slice and a whole GPU in one pod: the pod is MIG (mode label `mig`), so no flavor of the
    `nvidia.com/gpu` group matches and Kueue refuses it -- no node offers both."""
    pod = workloads.inference_pod("mig")
    pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = 1
    journey = runner.run(pod, NS["acme"], fleet)
    step, reason = journey.refusal
    assert step == "kueue-admission", journey
    assert reason == ("couldn't assign flavors to pod set main: flavor h100 doesn't match node affinity, "
                      "flavor h100-quarter doesn't match node affinity")


@pytest.mark.parametrize(("slug", "mode"), [(s, m) for s in TRUST for m in ALLOWED[s]])
def test_every_gpu_flavor_and_pool_carries_the_mode_its_pods_get(fleet, slug: str, mode: str) -> None:
    """The three places the label must agree: the pod (routing policy), the ResourceFlavor Kueue admits it on
    (nodeLabels) and the nodes of the NodePool Karpenter creates for it (template labels)."""
    journey = runner.run(workloads.inference_pod(mode), NS[slug], fleet)
    assert journey.ok, journey
    assert journey.pod["spec"]["nodeSelector"][MODE_LABEL] == mode
    flavor = fleet.one("ResourceFlavor", FLAVOR[mode])
    assert flavor["spec"]["nodeLabels"][MODE_LABEL] == mode
    pool = fleet.one("NodePool", journey.step("scheduler").facts["node_pool"])
    assert pool["spec"]["template"]["metadata"]["labels"][MODE_LABEL] == mode


@pytest.mark.parametrize(("slug", "mode"), [(s, m) for s in TRUST for m in ALLOWED[s]])
def test_a_node_pool_could_create_the_node(fleet, slug: str, mode: str) -> None:
    journey = runner.run(workloads.inference_pod(mode), NS[slug], fleet)
    result = runner.NODE_POOL_STEP(journey.pod, fleet)
    assert result.ok, result.reason


def test_backstop_quota_keys_follow_each_tenants_quotas(fleet) -> None:
    """Defect 1's backstop, per tenant: nominal + borrowing per allowed flavor, `requests.` keys only."""
    hard = {slug: fleet.one("ResourceQuota", "gpufleet-backstop", NS[slug])["spec"]["hard"] for slug in TRUST}
    gpu_keys = {slug: {k: v for k, v in h.items() if "nvidia.com" in k} for slug, h in hard.items()}
    assert gpu_keys == {
        # 4 whole (2 + 2 borrowed) + 8 quarter vGPUs; 2 MIG; 8 x 25 % cores and memory.
        "acme": {"requests.nvidia.com/gpu": "12", "requests.nvidia.com/mig-3g.40gb": "2",
                 "requests.nvidia.com/gpucores": "200", "requests.nvidia.com/gpumem-percentage": "200"},
        "beta": {"requests.nvidia.com/gpu": "2", "requests.nvidia.com/mig-3g.40gb": "7"},
        "gamma": {"requests.nvidia.com/gpu": "4"},
    }


def test_a_suspended_tenant_has_every_gpu_key_at_zero() -> None:
    from tenants.render import render_tenant

    from .fleet import context, view

    ctx = context()
    manifests = render_tenant(view("acme", ctx.extra["scheduling"], phase="suspended"), ctx)
    hard = next(m for m in manifests if m["kind"] == "ResourceQuota")["spec"]["hard"]
    assert {k: v for k, v in hard.items() if "nvidia.com" in k} == dict.fromkeys(
        ["requests.nvidia.com/gpu", "requests.nvidia.com/mig-3g.40gb", "requests.nvidia.com/gpucores",
         "requests.nvidia.com/gpumem-percentage"], "0")


def test_hamis_device_plugin_runs_on_the_hami_pools_nodes_and_nowhere_else(fleet) -> None:
    """Issue 26 B5: HAMi's device plugin (the DaemonSet the platform's HAMi release renders) runs on every node of
    a HAMi pool -- so those nodes offer the shares Kueue admits -- and on no other GPU node."""
    from .steps import hami, scheduler

    pod = hami.device_plugin_pod(fleet)
    pools = {p["metadata"]["name"]: p for p in fleet.objects("NodePool")}
    runs = {name for name, pool in pools.items() if not scheduler.node_refusal(pod, hami.pool_node(pool))}
    assert runs == {"pool-h100-quarter"}


def test_hamis_chart_defaults_ran_on_no_node(fleet) -> None:
    """Issue 26 B5 before the fix: the chart's `gpu: "on"` selector and no tolerations fit no pool's node."""
    from .steps import hami, scheduler

    release = fleet.one("HelmRelease", "hami", "flux-system")
    release["spec"]["values"].pop("devicePlugin")
    pod = hami.device_plugin_pod(fleet)
    for pool in fleet.objects("NodePool"):
        assert scheduler.node_refusal(pod, hami.pool_node(pool)), pool["metadata"]["name"]


@pytest.mark.parametrize("annotation", ["kueue.x-k8s.io/podset-required-topology",
                                        "kueue.x-k8s.io/podset-preferred-topology",
                                        "kueue.x-k8s.io/podset-unconstrained-topology"])
def test_a_pod_asking_kueue_for_topology_is_refused_at_creation_with_the_reason(fleet, annotation) -> None:
    """At shipped settings no flavor is topology-aware, so Kueue would keep such a pod pending for ever
    (gpufleet-host, the cpu/memory flavor, is not TAS): the tenant is told at creation instead."""
    asking = workloads.inference_pod("whole")
    asking["metadata"]["annotations"][annotation] = "kubernetes.io/hostname"
    refused = runner.run(asking, NS["beta"], fleet)
    assert refused.refusal[0] == "kyverno-validate", refused.refusal
    assert "topology-aware placement is not offered" in refused.refusal[1]
    assert runner.run(workloads.inference_pod("whole"), NS["beta"], fleet).refusal is None


def test_a_topology_aware_gpu_flavor_would_refuse_every_pod(fleet) -> None:
    """Issue 26 B1, why no flavor is topology-aware: with `topologyName` on h100 (what GPUFLEET_TOPOLOGY_LEVELS used
    to render) the ClusterQueue is not TAS-only (gpufleet-host), so Kueue refuses the pod; asking for topology
    moves the refusal to gpufleet-host; and a TAS-only queue gives the pod two TAS flavors (GPU and cpu/memory)."""
    flavor = fleet.one("ResourceFlavor", "h100")
    flavor["spec"]["topologyName"] = "gpu-topology"
    fleet.platform.append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology",
                           "metadata": {"name": "gpu-topology"},
                           "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]}})
    plain = runner.run(workloads.inference_pod("whole"), NS["beta"], fleet)
    assert plain.refusal[0] == "kueue-admission"
    assert 'Flavor "h100" supports only TopologyAwareScheduling' in plain.refusal[1]
    asking = workloads.inference_pod("whole")
    asking["metadata"]["annotations"]["kueue.x-k8s.io/podset-required-topology"] = "kubernetes.io/hostname"
    # The routing policy refuses such a pod at creation (test_a_pod_asking_kueue_for_topology_is_refused_...);
    # without that rule, Kueue would hold it: gpufleet-host covers its cpu/memory and is not topology-aware.
    for policy in fleet.objects("Policy", NS["beta"]):
        policy["spec"]["rules"] = [r for r in policy["spec"]["rules"] if r["name"] != "no-kueue-topology-requests"]
    refused = runner.run(asking, NS["beta"], fleet)
    assert 'Flavor "gpufleet-host" does not support TopologyAwareScheduling' in refused.refusal[1]
    # Every flavor of beta's queue topology-aware (a TAS-only queue): one pod set then holds two TAS flavors.
    queue = fleet.one("ClusterQueue", NS["beta"])
    for name in {f["name"] for g in queue["spec"]["resourceGroups"] for f in g["flavors"]}:
        fleet.one("ResourceFlavor", name)["spec"]["topologyName"] = "gpu-topology"
    tas_only = runner.run(workloads.inference_pod("whole"), NS["beta"], fleet)
    assert "more than one TAS flavor assigned: gpufleet-host, h100" in tas_only.refusal[1]
