"""Each journey model against cases transcribed from upstream's own tests at the pinned tags (issue 26, "what to
build" 5(b)): inputs and expected outcomes as data, each with `repo@tag:path:line` of the test case. A model that
disagrees with upstream fails here, whatever the rendering does.

kubernetes-sigs/kueue@v0.19.2      TAS flavor assignment and placement, flavors ruled out by node selector/affinity
                                   and taints, quotaCheckStrategy, the pod webhook, stop of an unadmitted pod
loft-sh/vcluster@v0.36.1           pod translation (nodeSelector), CoreDNS template, gates (and the fix's cases)
kubernetes-sigs/karpenter@v1.14.1  Requirements.Compatible
kubernetes/pod-security-admission@v0.33.0  restricted: seccompProfile and capabilities
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from .fleet import Fleet
from .steps import karpenter, kueue, pss, vcluster_sync

KUEUE = "kubernetes-sigs/kueue@v0.19.2"
VCLUSTER = "loft-sh/vcluster@v0.36.1"
KARPENTER = "kubernetes-sigs/karpenter@v1.14.1"
PSA = "kubernetes/pod-security-admission@v0.33.0"
HOSTNAME = "kubernetes.io/hostname"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"


# --- Kueue: topology-aware scheduling --------------------------------------------------------------------------
# pkg/scheduler/scheduler_tas_test.go:66-77 (defaultSingleNode), :211-217 (defaultSingleLevelTopology,
# defaultFlavor, defaultTASFlavor), :224-228 (defaultClusterQueue).
X1 = {"kind": "Node", "metadata": {"name": "x1", "labels": {"tas-node": "true", HOSTNAME: "x1"}},
      "spec": {}, "status": {"allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"}}}
TOPOLOGY = {"kind": "Topology", "metadata": {"name": "tas-single-level"}, "spec": {"levels": [{"nodeLabel": HOSTNAME}]}}
TAS_FLAVOR = {"kind": "ResourceFlavor", "metadata": {"name": "tas-default"},
              "spec": {"nodeLabels": {"tas-node": "true"}, "topologyName": "tas-single-level"}}
PLAIN_FLAVOR = {"kind": "ResourceFlavor", "metadata": {"name": "default"}, "spec": {}}


def cq(*groups: list[tuple[str, dict[str, str]]]) -> dict[str, Any]:
    return {"kind": "ClusterQueue", "metadata": {"name": "tas-main"}, "spec": {"resourceGroups": [
        {"coveredResources": sorted({r for _, res in flavors for r in res}),
         "flavors": [{"name": name, "resources": [{"name": r, "nominalQuota": q} for r, q in res.items()]}
                     for name, res in flavors]} for flavors in groups]}}


def tas_fleet(queue: dict[str, Any], *flavors: dict[str, Any], topologies: tuple = (TOPOLOGY,)) -> Fleet:
    lq = {"kind": "LocalQueue", "metadata": {"name": "tas-main", "namespace": "default"},
          "spec": {"clusterQueue": "tas-main"}}
    ns = {"kind": "Namespace", "metadata": {"name": "default", "labels": {}}}
    return Fleet(platform=[queue, lq, ns, *flavors, *topologies], tenants={}, nodes=[copy.deepcopy(X1)])


def workload(count: int = 1, topology: str | None = None, **requests: str) -> dict[str, Any]:
    """MakeWorkload("foo", "default").Queue("tas-main").PodSets(MakePodSet("one", count)...): a pod (group)."""
    labels = {kueue.QUEUE_LABEL: "tas-main"}
    annotations = {}
    if count > 1:
        labels[kueue.GROUP_LABEL] = "foo"
        annotations[kueue.GROUP_COUNT] = str(count)
    if topology:
        annotations[REQUIRED] = topology
    return {"kind": "Pod", "metadata": {"name": "foo", "namespace": "default", "labels": labels,
                                        "annotations": annotations},
            "spec": {"containers": [{"name": "c", "resources": {"requests": dict(requests)}}]}}


def admit(pod: dict[str, Any], fleet: Fleet):
    return kueue.admit(kueue.webhook(pod, fleet).pod, fleet)


def test_kueue_tas_workload_without_annotation_uses_the_only_tas_flavor() -> None:
    """scheduler_tas_test.go:1844 "workload which does not specify TAS annotation uses the only TAS flavor"."""
    result = admit(workload(cpu="1"), tas_fleet(cq([("tas-default", {"cpu": "50"})]), TAS_FLAVOR))
    assert result.ok and result.facts["flavors"] == {"cpu": "tas-default"}
    assert result.facts["topology_flavor"] == "tas-default"


def test_kueue_tas_workload_requiring_tas_skips_the_non_tas_flavor() -> None:
    """scheduler_tas_test.go:1879 "workload requiring TAS skips the non-TAS flavor": `default` is NoFit with
    "Flavor \\"default\\" does not support TopologyAwareScheduling" (:1913)."""
    fleet = tas_fleet(cq([("default", {"cpu": "50"}), ("tas-default", {"cpu": "50"})]), TAS_FLAVOR, PLAIN_FLAVOR)
    result = admit(workload(topology=HOSTNAME, cpu="1"), fleet)
    assert result.ok and result.facts["flavors"] == {"cpu": "tas-default"}
    only_plain = tas_fleet(cq([("default", {"cpu": "50"})]), TAS_FLAVOR, PLAIN_FLAVOR)
    refused = admit(workload(topology=HOSTNAME, cpu="1"), only_plain)
    assert not refused.ok and 'Flavor "default" does not support TopologyAwareScheduling' in refused.reason


def test_kueue_tas_workload_not_needing_tas_skips_the_tas_flavor() -> None:
    """scheduler_tas_test.go:1919 "workload which does not need TAS skips the TAS flavor": `tas-default` is NoFit
    with "Flavor \\"tas-default\\" supports only TopologyAwareScheduling" (:1949)."""
    fleet = tas_fleet(cq([("tas-default", {"cpu": "50"}), ("default", {"cpu": "50"})]), TAS_FLAVOR, PLAIN_FLAVOR)
    result = admit(workload(cpu="1"), fleet)
    assert result.ok and result.facts["flavors"] == {"cpu": "default"} and result.facts["topology_flavor"] is None
    # The same refusal in a queue that is not TAS-only because another group holds a plain flavor (ours).
    mixed = tas_fleet(cq([("tas-default", {"cpu": "50"})], [("default", {"memory": "50Gi"})]), TAS_FLAVOR,
                      PLAIN_FLAVOR)
    refused = admit(workload(cpu="1", memory="1Gi"), mixed)
    assert not refused.ok and 'Flavor "tas-default" supports only TopologyAwareScheduling' in refused.reason


def test_kueue_tas_refuses_more_pods_than_the_nodes_hold() -> None:
    """scheduler_tas_test.go:2116 "workload does not get scheduled as it does not fit within the node capacity":
    `couldn't assign flavors to pod set one: topology "tas-single-level" allows to fit only 1 out of 2 pod(s)`."""
    fleet = tas_fleet(cq([("tas-default", {"cpu": "50", "memory": "50Gi"})]), TAS_FLAVOR)
    refused = admit(workload(2, topology=HOSTNAME, cpu="1"), fleet)
    assert not refused.ok
    assert refused.reason.endswith('topology "tas-single-level" allows to fit only 1 out of 2 pod(s)')
    fleet.nodes.clear()  # what a Karpenter-provisioned pool looks like before its first node
    none = admit(workload(1, topology=HOSTNAME, cpu="1"), fleet)
    assert none.reason.endswith('topology "tas-single-level" doesn\'t allow to fit any of 1 pod(s)')


def test_kueue_tas_refuses_two_tas_flavors_for_one_pod_set() -> None:
    """flavorassigner_test.go:4349 "more than one TAS flavor assigned (onlyTASFlavor fails)": cpu on flavor-a,
    memory on flavor-b, both TAS, required topology -> MultipleTASFlavorsAssignedError{flavor-a, flavor-b}."""
    a = {"kind": "ResourceFlavor", "metadata": {"name": "flavor-a"},
         "spec": {"nodeLabels": {"tas-node": "true"}, "topologyName": "tas-single-level"}}
    b = {**copy.deepcopy(a), "metadata": {"name": "flavor-b"}}
    fleet = tas_fleet(cq([("flavor-a", {"cpu": "50"})], [("flavor-b", {"memory": "50Gi"})]), a, b)
    refused = admit(workload(topology=HOSTNAME, cpu="1", memory="1Gi"), fleet)
    assert refused.reason.endswith("more than one TAS flavor assigned: flavor-a, flavor-b")


# --- Kueue: the pod webhook and the stop of an unadmitted pod ---------------------------------------------------
def kueue_release(tas: bool) -> dict[str, Any]:
    return {"kind": "HelmRelease", "metadata": {"name": "kueue", "namespace": "flux-system"}, "spec": {"values": {
        "controllerManager": {"featureGates": [{"name": "TopologyAwareScheduling", "enabled": tas}]}}}}


@pytest.mark.parametrize(("case", "tas", "gates"), [
    # pod_webhook_test.go:116 "pod with queue nil ns selector" (TopologyAwareScheduling off)
    ("pod_webhook_test.go:116", False, [kueue.GATE]),
    # pod_webhook_test.go:394 "pod with TAS" (on): KueueSchedulingGate + TopologySchedulingGate
    ("pod_webhook_test.go:394", True, [kueue.GATE, kueue.TOPOLOGY_GATE]),
])
def test_kueue_pod_webhook(case: str, tas: bool, gates: list[str]) -> None:
    ns = {"kind": "Namespace", "metadata": {"name": "test-ns", "labels": {}}}
    pod = {"kind": "Pod", "metadata": {"name": "test-pod", "namespace": "test-ns",
                                       "labels": {kueue.QUEUE_LABEL: "test-queue"}}, "spec": {"containers": []}}
    result = kueue.webhook(pod, Fleet(platform=[ns, kueue_release(tas)], tenants={}))
    assert [g["name"] for g in result.pod["spec"]["schedulingGates"]] == gates, case
    assert result.pod["metadata"]["labels"]["kueue.x-k8s.io/managed"] == "true"  # ManagedByKueueLabel()
    assert result.pod["metadata"]["finalizers"] == [kueue.FINALIZER]  # KueueFinalizer()


def test_kueue_stops_a_pod_without_its_gate_whose_workload_is_not_admitted() -> None:
    """pod_controller_test.go:912 "pod without scheduling gate is terminated if workload is not admitted": the pod
    gets TerminationTarget (reason NotAdmitted, "Not admitted by cluster queue"); Stop deletes it
    (pod_controller.go:513-552)."""
    pod = {"kind": "Pod", "metadata": {"name": "pod", "namespace": "ns", "labels": {
        kueue.QUEUE_LABEL: "user-queue", "kueue.x-k8s.io/managed": "true"}, "finalizers": [kueue.FINALIZER]},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}
    result = kueue.admit(pod, Fleet(platform=[], tenants={}))
    assert not result.ok and result.facts == {"admitted": False, "deleted": True}
    assert result.pod["status"]["conditions"] == [{"type": "TerminationTarget", "status": "True",
                                                   "reason": "NotAdmitted", "message": "Not admitted by cluster queue"}]


# --- Kueue: flavors a pod set's node selector, affinity and tolerations rule out -----------------------------------
# pkg/scheduler/flavorassigner/flavorassigner_test.go, TestAssignFlavors' resourceFlavors (:178-205) and
# TestIsNoFitDueToCapacityAndLimits' (:5308-5317). The case's podset as a pod (one pod set "main").
SPOT = {"key": "instance", "value": "spot", "effect": "NoSchedule"}
ASSIGN_FLAVORS = {
    "default": {},
    "one": {"nodeLabels": {"type": "one"}},
    "two": {"nodeLabels": {"type": "two"}},
    "tainted": {"nodeTaints": [SPOT]},
    "label-x-a": {"nodeLabels": {"x": "a"}},
    "label-xy-b": {"nodeLabels": {"x": "b", "y": "k"}},
    "flavor-a": {"nodeLabels": {"type": "a"}},
    "flavor-b": {"nodeTaints": [{"key": "key", "value": "val", "effect": "NoSchedule"}]},
}


def in_(key: str, *values: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]}


def flavor_fleet(group: list[tuple[str, dict[str, str]]], flavors: dict[str, dict[str, Any]] | None = None,
                 *extra: dict[str, Any]) -> Fleet:
    specs = flavors or ASSIGN_FLAVORS
    objects = [{"kind": "ResourceFlavor", "metadata": {"name": name}, "spec": specs[name]} for name, _ in group]
    return tas_fleet(cq(group), *objects, *extra, topologies=())


def placed(pod: dict[str, Any], selector: dict[str, str] | None = None, terms: list[dict[str, Any]] | None = None,
           tolerations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    if selector:
        pod["spec"]["nodeSelector"] = selector
    if terms:
        pod["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": terms}}}
    if tolerations:
        pod["spec"]["tolerations"] = tolerations
    return pod


NO_MATCH = "couldn't assign flavors to pod set main: "
AFFINITY_CASES = [
    # (case, flavors of the one resource group with their cpu/memory quota, the pod set, admitted on / refusal)
    ("flavorassigner_test.go:913 multiple flavors, fits while skipping tainted flavor",
     [("tainted", {"cpu": "4"}), ("two", {"cpu": "4"})], placed(workload(cpu="3")), "two"),
    ("flavorassigner_test.go:954 multiple flavors, fits a node selector",
     [("one", {"cpu": "4"}), ("two", {"cpu": "4"})],
     placed(workload(cpu="1"), {"type": "two", "ignored1": "foo"}, [in_("ignored2", "bar")]), "two"),
    ("flavorassigner_test.go:1013 multiple flavors, fits with node affinity",
     [("one", {"cpu": "4", "memory": "1Gi"}), ("two", {"cpu": "4", "memory": "1Gi"})],
     placed(workload(cpu="1", memory="1Mi"), {"ignored1": "foo"}, [in_("type", "two")]), "two"),
    ("flavorassigner_test.go:1077 multiple flavors, node affinity fits any flavor",
     [("one", {"cpu": "4"}), ("two", {"cpu": "4"})],
     placed(workload(cpu="1"), terms=[in_("ignored2", "bar"), in_("cpuType", "two")]), "one"),
    ("flavorassigner_test.go:1141 multiple flavors with different label keys, selector only uses flavor's own keys",
     [("label-x-a", {"cpu": "4"}), ("label-xy-b", {"cpu": "4"})],
     placed(workload(cpu="1"), {"x": "a", "y": "g"}), "label-x-a"),
    ("flavorassigner_test.go:1178 labelless flavor in group with labeled flavor, workload uses labeled selector",
     [("default", {"cpu": "4"}), ("two", {"cpu": "4"})], placed(workload(cpu="1"), {"type": "two"}), "default"),
    ("flavorassigner_test.go:1215 multiple flavors, doesn't fit node affinity",
     [("one", {"cpu": "4"}), ("two", {"cpu": "4"})], placed(workload(cpu="1"), terms=[in_("type", "three")]),
     NO_MATCH + "flavor one doesn't match node affinity, flavor two doesn't match node affinity"),
    # TestIsNoFitDueToCapacityAndLimits: the queue's nominal quota 2 (its borrowing limit plays no part at cpu 1).
    ("flavorassigner_test.go:5401 taints mismatch",
     [("flavor-a", {"cpu": "2"}), ("flavor-b", {"cpu": "2"})], placed(workload(cpu="1"), {"type": "wrong"}),
     NO_MATCH + "flavor flavor-a doesn't match node affinity, untolerated taint {key val NoSchedule <nil>} in flavor "
     "flavor-b"),
    ("flavorassigner_test.go:5412 succeeds to schedule on flavor-b with a tolerated taint",
     [("flavor-a", {"cpu": "2"}), ("flavor-b", {"cpu": "2"})],
     placed(workload(cpu="1"), {"type": "non-existent"},
            tolerations=[{"key": "key", "operator": "Equal", "value": "val", "effect": "NoSchedule"}]), "flavor-b"),
]


@pytest.mark.parametrize(("case", "group", "pod", "want"), AFFINITY_CASES,
                         ids=[c[0].split()[0] for c in AFFINITY_CASES])
def test_kueue_skips_flavors_the_pod_set_does_not_match(case: str, group: list, pod: dict[str, Any], want: str) -> None:
    result = admit(copy.deepcopy(pod), flavor_fleet(group))
    if want.startswith(NO_MATCH):
        assert not result.ok and result.reason == want, case
        return
    assert result.ok, (case, result.reason)
    assert set(result.facts["flavors"].values()) == {want}, case
    # On admission the flavor's nodeLabels join the pod's nodeSelector (what kube-scheduler then sees).
    labels = ASSIGN_FLAVORS[want].get("nodeLabels", {})
    assert labels.items() <= result.pod["spec"].get("nodeSelector", {}).items(), case


def test_kueue_node_affinity_mismatch_when_both_flavors_declare_the_same_key() -> None:
    """flavorassigner_test.go:5425 "node affinity mismatch when both flavors declare same key": type=non-existent
    against flavor-a (type a) and flavor-b (type b): both NoMatchingFlavor."""
    flavors = {"flavor-a": {"nodeLabels": {"type": "a"}}, "flavor-b": {"nodeLabels": {"type": "b"}}}
    fleet = flavor_fleet([("flavor-a", {"cpu": "2"}), ("flavor-b", {"cpu": "2"})], flavors)
    refused = admit(placed(workload(cpu="1"), {"type": "non-existent"}), fleet)
    assert refused.reason == NO_MATCH + ("flavor flavor-a doesn't match node affinity, "
                                         "flavor flavor-b doesn't match node affinity")


# --- Kueue: quotaCheckStrategy -------------------------------------------------------------------------------------
def strategy_release(strategy: str, gate: bool | None = None) -> dict[str, Any]:
    """The Kueue release as scheduling/prerequisites.py renders it: the Configuration in the chart's
    managerConfig.controllerManagerConfigYaml, feature gates in controllerManager.featureGates."""
    values: dict[str, Any] = {"managerConfig": {"controllerManagerConfigYaml": yaml.safe_dump(
        {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
         "resources": {"quotaCheckStrategy": strategy}})}}
    if gate is not None:
        values["controllerManager"] = {"featureGates": [{"name": "QuotaCheckStrategy", "enabled": gate}]}
    return {"kind": "HelmRelease", "metadata": {"name": "kueue", "namespace": "flux-system"},
            "spec": {"values": values}}


def test_kueue_ignore_undeclared_admits_on_the_declared_resources_only() -> None:
    """test/integration/singlecluster/scheduler/quotacheckstrategy/quota_check_strategy_test.go:88 "should ignore
    undeclared resources and not use them to calculate entry penalty": cpu 2 + example.com/gpu 100 on a queue
    covering cpu (10) only is admitted, and the undeclared resource is not in the assignment's usage."""
    group = [("default", {"cpu": "10"})]
    fleet = flavor_fleet(group, {"default": {}}, strategy_release("IgnoreUndeclared"))
    result = admit(workload(cpu="2", **{"example.com/gpu": "100"}), fleet)
    assert result.ok and result.facts["flavors"] == {"cpu": "default"}


def test_kueue_ignore_undeclared_needs_its_feature_gate() -> None:
    """quota_check_strategy_test.go:196 "should not admit workload with undeclared resources" (IgnoreUndeclared
    with the QuotaCheckStrategy gate off): the workload stays pending; and BlockUndeclared, Kueue's default."""
    group = [("default", {"cpu": "10"})]
    for release in (strategy_release("IgnoreUndeclared", gate=False), strategy_release("BlockUndeclared")):
        refused = admit(workload(cpu="2", **{"example.com/gpu": "100"}),
                        flavor_fleet(group, {"default": {}}, release))
        assert refused.reason == NO_MATCH + "resource example.com/gpu unavailable in ClusterQueue"


# --- vCluster ----------------------------------------------------------------------------------------------------
def vcluster_fleet(values: dict[str, Any]) -> Fleet:
    release = {"kind": "HelmRelease", "metadata": {"name": "vcluster", "namespace": "test"},
               "spec": {"values": values}}
    return Fleet(platform=[release], tenants={})


def test_vcluster_enforces_the_node_selector_on_synced_pods() -> None:
    """pkg/controllers/resources/pods/syncer_test.go:127 "SyncToHost and enforce NodeSelector"."""
    fleet = vcluster_fleet({"sync": {"fromHost": {"nodes": {"enabled": True, "selector": {
        "labels": {"labelB": "enforcedB", "otherLabel": "abc"}}}}}})
    pod = {"kind": "Pod", "metadata": {"name": "p", "namespace": "testns"},
           "spec": {"nodeSelector": {"labelA": "valueA", "labelB": "valueB"}, "containers": [{"name": "c"}]}}
    host = vcluster_sync.translate(pod, "test", fleet)
    assert host["spec"]["nodeSelector"] == {"labelA": "valueA", "labelB": "enforcedB", "otherLabel": "abc"}


EXTERNAL, VIRTUAL = {"name": "external.example.com/gate"}, {"name": "virtual.example.com/gate"}


@pytest.mark.parametrize(("host", "virtual_old", "virtual", "keeps", "want"), [
    # v0.36.1 diff.go:163: the host pod's gates become the virtual pod's (Kueue's are lost)
    ([EXTERNAL], [], [], False, []),
    ([EXTERNAL], [], [VIRTUAL], False, [VIRTUAL]),
    # the fix's own cases (loft-sh/vcluster commit 3a272b45a, in no tag: diff_test.go "preserves an externally
    # injected host gate", "adds a virtual gate while preserving an external host gate", "removes a gate
    # explicitly removed from the virtual pod")
    ([EXTERNAL], [], [], True, [EXTERNAL]),
    ([EXTERNAL], [], [VIRTUAL], True, [VIRTUAL, EXTERNAL]),
    ([VIRTUAL, EXTERNAL], [VIRTUAL], [], True, [EXTERNAL]),
])
def test_vcluster_scheduling_gates_on_resync(host, virtual_old, virtual, keeps, want) -> None:
    assert vcluster_sync.diff_gates(host, virtual_old, virtual, keeps) == want


def test_vcluster_coredns_default_template(chart_defaults) -> None:
    """pkg/coredns/template_test.go:31 "default" (RUN_AS_USER/GROUP 1001): no pod securityContext, the default
    container securityContext, nodeSelector kubernetes.io/os: linux, the chart's resources."""
    pod = vcluster_sync.coredns_pod("test", vcluster_fleet({}), chart_defaults)
    assert "securityContext" not in pod["spec"]
    assert pod["spec"]["nodeSelector"] == {"kubernetes.io/os": "linux"}
    (container,) = pod["spec"]["containers"]
    assert container["securityContext"] == {
        "runAsNonRoot": True, "runAsUser": 1001, "runAsGroup": 1001, "allowPrivilegeEscalation": False,
        "capabilities": {"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]}, "readOnlyRootFilesystem": True}
    assert container["resources"] == {"limits": {"cpu": "1000m", "memory": "170Mi"},
                                      "requests": {"cpu": "20m", "memory": "64Mi"}}


def test_vcluster_coredns_security_context_from_values(chart_defaults) -> None:
    """pkg/coredns/template_test.go:734 "should correctly set coreDNS security context"."""
    pod_sc = {"runAsUser": 1042, "runAsGroup": 2042, "fsGroup": 3042}
    container_sc = {"runAsUser": 1142, "runAsGroup": 2242, "allowPrivilegeEscalation": False,
                    "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}}
    fleet = vcluster_fleet({"controlPlane": {"coredns": {"security": {
        "podSecurityContext": pod_sc, "containerSecurityContext": container_sc}}}})
    pod = vcluster_sync.coredns_pod("test", fleet, chart_defaults)
    assert pod["spec"]["securityContext"] == pod_sc
    assert pod["spec"]["containers"][0]["securityContext"] == container_sc


def test_vcluster_coredns_seccomp_from_the_pod_security_standard(chart_defaults) -> None:
    """template.go:223-231: without a podSecurityContext, `policies.podSecurityStandard` gives RuntimeDefault."""
    pod = vcluster_sync.coredns_pod("test", vcluster_fleet({"policies": {"podSecurityStandard": "restricted"}}),
                                    chart_defaults)
    assert pod["spec"]["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}


# --- Karpenter: Requirements.Compatible --------------------------------------------------------------------------
# pkg/scheduling/requirements_test.go: (line, existing, incoming, compatible) for the In/NotIn/Exists/DoesNotExist
# requirements of the test (Gt/Lt and numeric values are not modelled). ALLOW_UNDEFINED is :57 "should be compatible
# with well-known v1 labels undefined" on topology.kubernetes.io/zone; STRICT is :298 "should be strictly
# compatible" -- without AllowUndefinedWellKnownLabels the zone behaves as any custom label, so the model is asked
# with a custom key.
KARPENTER_ALLOW_UNDEFINED = [
    (58, 'unconstrained', 'unconstrained', True),
    (59, 'unconstrained', 'exists', True),
    (60, 'unconstrained', 'doesNotExist', True),
    (61, 'unconstrained', 'inA', True),
    (62, 'unconstrained', 'inB', True),
    (63, 'unconstrained', 'inAB', True),
    (64, 'unconstrained', 'notInA', True),
    (74, 'exists', 'unconstrained', True),
    (75, 'exists', 'exists', True),
    (76, 'exists', 'doesNotExist', False),
    (77, 'exists', 'inA', True),
    (78, 'exists', 'inB', True),
    (79, 'exists', 'inAB', True),
    (80, 'exists', 'notInA', True),
    (90, 'doesNotExist', 'unconstrained', True),
    (91, 'doesNotExist', 'exists', False),
    (92, 'doesNotExist', 'doesNotExist', True),
    (93, 'doesNotExist', 'inA', False),
    (94, 'doesNotExist', 'inB', False),
    (95, 'doesNotExist', 'inAB', False),
    (96, 'doesNotExist', 'notInA', True),
    (106, 'inA', 'unconstrained', True),
    (107, 'inA', 'exists', True),
    (108, 'inA', 'doesNotExist', False),
    (109, 'inA', 'inA', True),
    (110, 'inA', 'inB', False),
    (111, 'inA', 'inAB', True),
    (112, 'inA', 'notInA', False),
    (122, 'inB', 'unconstrained', True),
    (123, 'inB', 'exists', True),
    (124, 'inB', 'doesNotExist', False),
    (125, 'inB', 'inA', False),
    (126, 'inB', 'inB', True),
    (127, 'inB', 'inAB', True),
    (128, 'inB', 'notInA', True),
    (138, 'inAB', 'unconstrained', True),
    (139, 'inAB', 'exists', True),
    (140, 'inAB', 'doesNotExist', False),
    (141, 'inAB', 'inA', True),
    (142, 'inAB', 'inB', True),
    (143, 'inAB', 'inAB', True),
    (144, 'inAB', 'notInA', True),
    (154, 'notInA', 'unconstrained', True),
    (155, 'notInA', 'exists', True),
    (156, 'notInA', 'doesNotExist', True),
    (157, 'notInA', 'inA', False),
    (158, 'notInA', 'inB', True),
    (159, 'notInA', 'inAB', True),
    (160, 'notInA', 'notInA', True),
]
KARPENTER_STRICT = [
    (301, 'unconstrained', 'exists', False),
    (302, 'unconstrained', 'inA', False),
    (303, 'unconstrained', 'inB', False),
    (304, 'unconstrained', 'inAB', False),
    (314, 'unconstrained', 'unconstrained', True),
    (315, 'unconstrained', 'doesNotExist', True),
    (316, 'unconstrained', 'notInA', True),
    (319, 'exists', 'unconstrained', True),
    (320, 'exists', 'exists', True),
    (321, 'exists', 'doesNotExist', False),
    (322, 'exists', 'inA', True),
    (323, 'exists', 'inB', True),
    (324, 'exists', 'inAB', True),
    (325, 'exists', 'notInA', True),
    (335, 'doesNotExist', 'unconstrained', True),
    (336, 'doesNotExist', 'exists', False),
    (337, 'doesNotExist', 'doesNotExist', True),
    (338, 'doesNotExist', 'inA', False),
    (339, 'doesNotExist', 'inB', False),
    (340, 'doesNotExist', 'inAB', False),
    (341, 'doesNotExist', 'notInA', True),
    (351, 'inA', 'unconstrained', True),
    (352, 'inA', 'exists', True),
    (353, 'inA', 'doesNotExist', False),
    (354, 'inA', 'inA', True),
    (355, 'inA', 'inB', False),
    (356, 'inA', 'inAB', True),
    (357, 'inA', 'notInA', False),
    (367, 'inB', 'unconstrained', True),
    (368, 'inB', 'exists', True),
    (369, 'inB', 'doesNotExist', False),
    (370, 'inB', 'inA', False),
    (371, 'inB', 'inB', True),
    (372, 'inB', 'inAB', True),
    (373, 'inB', 'notInA', True),
    (383, 'inAB', 'unconstrained', True),
    (384, 'inAB', 'exists', True),
    (385, 'inAB', 'doesNotExist', False),
    (386, 'inAB', 'inA', True),
    (387, 'inAB', 'inB', True),
    (388, 'inAB', 'inAB', True),
    (389, 'inAB', 'notInA', True),
    (399, 'notInA', 'unconstrained', True),
    (400, 'notInA', 'exists', True),
    (401, 'notInA', 'doesNotExist', True),
    (402, 'notInA', 'inA', False),
    (403, 'notInA', 'inB', True),
    (404, 'notInA', 'inAB', True),
    (405, 'notInA', 'notInA', True),
]
REQUIREMENTS = {"unconstrained": None, "exists": ("Exists", []), "doesNotExist": ("DoesNotExist", []),
                "inA": ("In", ["A"]), "inB": ("In", ["B"]), "inAB": ("In", ["A", "B"]), "notInA": ("NotIn", ["A"])}


def compatible(key: str, existing: str, incoming: str) -> bool:
    pool = {"kind": "NodePool", "metadata": {"name": "p"}, "spec": {"template": {"metadata": {}, "spec": {
        "requirements": [] if REQUIREMENTS[existing] is None else [
            {"key": key, "operator": REQUIREMENTS[existing][0], "values": REQUIREMENTS[existing][1]}]}}}}
    expressions = [] if REQUIREMENTS[incoming] is None else [
        {"key": key, "operator": REQUIREMENTS[incoming][0], "values": REQUIREMENTS[incoming][1]}]
    pod = {"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": expressions}]}}}}}
    return karpenter.incompatibility(pool, pod) is None


@pytest.mark.parametrize(("line", "existing", "incoming", "ok"), KARPENTER_ALLOW_UNDEFINED)
def test_karpenter_compatible_with_well_known_labels_undefined(line: int, existing: str, incoming: str,
                                                               ok: bool) -> None:
    assert compatible("topology.kubernetes.io/zone", existing, incoming) is ok, f"requirements_test.go:{line}"


@pytest.mark.parametrize(("line", "existing", "incoming", "ok"), KARPENTER_STRICT)
def test_karpenter_strictly_compatible(line: int, existing: str, incoming: str, ok: bool) -> None:
    assert compatible("example.com/team", existing, incoming) is ok, f"requirements_test.go:{line}"


def test_karpenter_unknown_label_message() -> None:
    """requirements_test.go:568 "should display an error message for unknown labels"."""
    pool = {"kind": "NodePool", "metadata": {"name": "p"}, "spec": {"template": {"metadata": {}, "spec": {}}}}
    pod = {"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "deployment", "operator": "Exists"}]}]}}}}}
    assert karpenter.incompatibility(pool, pod) == 'label "deployment" does not have known values'


# --- Pod Security admission: restricted ---------------------------------------------------------------------------
RESTRICTED_NS = {"kind": "Namespace", "metadata": {"name": "r", "labels": {
    "pod-security.kubernetes.io/enforce": "restricted"}}}


def restricted(spec: dict[str, Any]) -> str:
    """The refusal (or "") of a pod in a `restricted` namespace."""
    pod = {"kind": "Pod", "metadata": {"name": "p", "namespace": "r"}, "spec": spec}
    result = pss.admit(pod, Fleet(platform=[RESTRICTED_NS], tenants={}))
    return "" if result.ok else result.reason


def c(name: str, **sc: Any) -> dict[str, Any]:
    return {"name": name, **({"securityContext": sc} if sc else {})}


UNCONFINED, RUNTIME = {"type": "Unconfined"}, {"type": "RuntimeDefault"}


@pytest.mark.parametrize(("case", "spec", "allowed"), [
    ("no explicit seccomp", {"containers": [c("a")]}, False),
    ("no explicit seccomp, windows Pod", {"os": {"name": "windows"}, "containers": [c("a")]}, True),
    ("no explicit seccomp, linux pod", {"os": {"name": "linux"}, "containers": [c("a")]}, False),
    ("pod seccomp invalid", {"securityContext": {"seccompProfile": UNCONFINED}, "containers": [c("a")]}, False),
    ("containers seccomp invalid", {"securityContext": {"seccompProfile": RUNTIME}, "containers": [
        c("a"), c("b"), c("c", seccompProfile=UNCONFINED), c("d", seccompProfile=UNCONFINED),
        c("e", seccompProfile=RUNTIME), c("f", seccompProfile=RUNTIME)]}, False),
    ("pod nil, container fallthrough", {"containers": [
        c("a"), c("b"), c("d", seccompProfile=RUNTIME), c("e", seccompProfile=RUNTIME)]}, False),
    # the positive counterpart of the last two: the pod's profile covers containers that set none
    ("pod RuntimeDefault, containers inherit", {"securityContext": {"seccompProfile": RUNTIME},
                                                "containers": [c("a"), c("b")]}, True),
])
def test_pod_security_restricted_seccomp(case: str, spec: dict[str, Any], allowed: bool) -> None:
    """policy/check_seccompProfile_restricted_test.go:25-106 (TestSeccompProfileRestricted_1_25)."""
    assert ("seccompProfile" not in restricted(spec)) is allowed, f"{PSA}: {case}"


@pytest.mark.parametrize(("case", "spec", "allowed"), [
    ("multiple containers", {"containers": [
        c("a", capabilities={"add": ["FOO", "BAR"]}), c("b", capabilities={"add": ["BAR", "BAZ"]}),
        c("c", capabilities={"add": ["NET_BIND_SERVICE", "CHOWN"], "drop": ["ALL", "FOO"]})]}, False),
    ("windows pod, admit without checking capabilities", {"os": {"name": "windows"}, "containers": [c("a")]}, True),
    ("linux pod, reject if security context is not set", {"os": {"name": "linux"}, "containers": [c("a")]}, False),
    # NET_BIND_SERVICE is the one capability restricted allows (what vCluster's CoreDNS adds)
    ("drop ALL, add NET_BIND_SERVICE", {"containers": [
        c("a", capabilities={"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]})]}, True),
])
def test_pod_security_restricted_capabilities(case: str, spec: dict[str, Any], allowed: bool) -> None:
    """policy/check_capabilities_restricted_test.go:25-66 (TestCapabilitiesRestricted_1_25)."""
    assert ("unrestricted capabilities" not in restricted(spec)) is allowed, f"{PSA}: {case}"
