"""Kueue v0.19.2: the pod integration's webhook and the admission of the pod's Workload.

Facts modelled (kubernetes-sigs/kueue tag v0.19.2):
* pkg/controller/jobs/pod/pod_webhook.go:151-186: a pod is managed when it carries `kueue.x-k8s.io/queue-name`
  (we run `manageJobsWithoutQueueName: false`); a managed pod gets the label `kueue.x-k8s.io/managed`, the
  finalizer of the same name, the gate `kueue.x-k8s.io/admission` and, with the TopologyAwareScheduling
  feature on (beta, on by default since v0.14: pkg/features/kube_features.go:683-686), the gate
  `kueue.x-k8s.io/topology`. Pods in kube-system/kueue-system are never managed.
* Stop of a pod that lost its gate (pkg/controller/jobframework/reconciler.go:653-662; pod_controller.go:234-
  236 `podSuspended` = terminated or gated, 513-552 `Stop`): its Workload is not admitted, so Kueue sets the
  `TerminationTarget` condition (reason NotAdmitted, "Not admitted by cluster queue") and deletes the pod.
* Topology-aware scheduling (pkg/scheduler/flavorassigner/tas_flavorassigner.go:104-204,
  pkg/cache/scheduler/clusterqueue.go:741-750): a pod set requests TAS explicitly (podset-required/preferred/
  unconstrained-topology annotation) or implicitly (its ClusterQueue is TAS-only: every flavor has a
  topologyName). A flavor with topologyName refuses a pod set that does not request TAS ("supports only
  TopologyAwareScheduling"); a flavor without refuses one that does, if its group covers a resource the pod
  requests ("does not support TopologyAwareScheduling"); more than one TAS flavor for one pod set is refused
  ("more than one TAS flavor assigned"); without a MultiKueue/ProvisioningRequest admission check the pods are
  placed on existing nodes only (the flavor's nodeLabels, every topology level, allocatable), else
  `topology "X" doesn't allow to fit any of N pod(s)` / `allows to fit only K out of N pod(s)`.
* LocalQueueDefaulting (GA in v0.19, pkg/controller/jobframework/defaults.go): a pod without the label
  in a namespace that has a LocalQueue named `default` is labelled `queue-name: default`.
* Pod groups (site/content/en/docs/tasks/run/plain_pods.md): pods labelled
  `kueue.x-k8s.io/pod-group-name` with annotation `kueue.x-k8s.io/pod-group-total-count: N` are one
  Workload, admitted all together. A Job inside a vCluster reaches the host only as its pods (the syncer
  syncs pods, not Jobs), so a gang on the host is a pod group.
* Admission (pkg/scheduler/flavorassigner/flavorassigner.go; messages from crds/kueue/
  workload-conditions.md): the LocalQueue must exist ("LocalQueue %s doesn't exist"), the ClusterQueue's
  namespaceSelector must match, every requested resource must be covered ("resource %s unavailable in
  ClusterQueue", :1071) unless the Configuration's `resources.quotaCheckStrategy` is IgnoreUndeclared with
  the QuotaCheckStrategy gate on (beta, on by default since v0.19, kube_features.go:871-874): then a
  resource no group covers is left out of admission and usage (:278, :804-812), flavors are tried in order
  within each resource group. A flavor is skipped ("NoMatchingFlavor") when the pod does not tolerate one
  of its NoSchedule/NoExecute nodeTaints (pod's and flavor's tolerations, "untolerated taint {k v effect
  <nil>} in flavor %s") or when the pod's nodeSelector and required node affinity, cut down to the keys the
  flavor's own nodeLabels define, do not match those labels ("flavor %s doesn't match node affinity",
  checkFlavorForPodSets :1208-1257, flavorSelector :1278-1322: a selector key the flavor does not define
  is ignored, and an affinity term left with no expression matches every flavor). Otherwise a flavor fits
  when the request is within nominalQuota + borrowingLimit ("insufficient quota for %s in flavor %s, ... >
  maximum capacity (%s)"); the reasons are reported sorted (Status.Message, :353-362). On admission the gate
  is removed and the flavor's nodeLabels/tolerations are added to the pod.
Not modelled: usage by other workloads (every queue starts empty), preemption, fair sharing, TAS slices and
node usage by other pods.
"""

from __future__ import annotations

import copy
from typing import Any

from . import StepResult, quantity, requests_of

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
GROUP_COUNT = "kueue.x-k8s.io/pod-group-total-count"
GATE = "kueue.x-k8s.io/admission"
TOPOLOGY_GATE = "kueue.x-k8s.io/topology"
FINALIZER = "kueue.x-k8s.io/managed"
TOPOLOGY_ANNOTATIONS = ("kueue.x-k8s.io/podset-required-topology", "kueue.x-k8s.io/podset-preferred-topology",
                        "kueue.x-k8s.io/podset-unconstrained-topology")


def tas_feature(fleet: Any) -> bool:
    """The TopologyAwareScheduling feature gate as the Kueue release sets it (default on since v0.14)."""
    release = fleet.one("HelmRelease", "kueue", "flux-system") if hasattr(fleet, "one") else None
    gates = (((release or {}).get("spec", {}).get("values") or {}).get("controllerManager") or {}).get(
        "featureGates") or []
    return next((g.get("enabled", True) for g in gates if g.get("name") == "TopologyAwareScheduling"), True)


def webhook(host_pod: dict[str, Any], fleet: Any) -> StepResult:
    pod = copy.deepcopy(host_pod)
    namespace = pod["metadata"]["namespace"]
    labels = pod["metadata"].setdefault("labels", {})
    if namespace in ("kube-system", "kueue-system"):
        return StepResult(True, "namespace excluded from Kueue", pod)
    if QUEUE_LABEL not in labels and fleet.one("LocalQueue", "default", namespace):
        labels[QUEUE_LABEL] = "default"  # LocalQueue defaulting
    if QUEUE_LABEL not in labels:
        return StepResult(True, "not managed by Kueue (no queue-name)", pod, {"managed": False})
    labels["kueue.x-k8s.io/managed"] = "true"
    meta = pod["metadata"]
    if FINALIZER not in meta.get("finalizers", []):
        meta["finalizers"] = [*meta.get("finalizers", []), FINALIZER]
    gates = [GATE, *([TOPOLOGY_GATE] if tas_feature(fleet) else [])]
    have = [g["name"] for g in pod["spec"].get("schedulingGates", [])]
    pod["spec"]["schedulingGates"] = [*pod["spec"].get("schedulingGates", []),
                                      *({"name": g} for g in gates if g not in have)]
    return StepResult(True, f"gated for LocalQueue {labels[QUEUE_LABEL]}", pod, {"managed": True})


def _group_size(pod: dict[str, Any]) -> int:
    if GROUP_LABEL in pod["metadata"].get("labels", {}):
        return int(pod["metadata"].get("annotations", {}).get(GROUP_COUNT, "1"))
    return 1


def admit(host_pod: dict[str, Any], fleet: Any) -> StepResult:
    labels = host_pod["metadata"].get("labels", {})
    gated = any(g["name"] == GATE for g in host_pod["spec"].get("schedulingGates", []))
    if not gated:
        if labels.get("kueue.x-k8s.io/managed") == "true":
            # reconciler.go:653-662 + pod_controller.go:513-552: not suspended, Workload not admitted -> Stop.
            stopped = copy.deepcopy(host_pod)
            stopped.setdefault("status", {})["conditions"] = [
                *stopped.get("status", {}).get("conditions", []),
                {"type": "TerminationTarget", "status": "True", "reason": "NotAdmitted",
                 "message": "Not admitted by cluster queue"}]
            return StepResult(False, "Stopped: Not admitted by cluster queue (its scheduling gate was removed before "
                              "admission: Kueue set TerminationTarget and DELETED the pod)", stopped,
                              {"admitted": False, "deleted": True})
        return StepResult(True, "not managed by Kueue", host_pod, {"admitted": False})
    namespace = host_pod["metadata"]["namespace"]
    lq = fleet.one("LocalQueue", labels[QUEUE_LABEL], namespace)
    if lq is None:
        return StepResult(False, f"LocalQueue {labels[QUEUE_LABEL]} doesn't exist", host_pod)
    cq = fleet.one("ClusterQueue", lq["spec"]["clusterQueue"])
    if cq is None:
        return StepResult(False, f"ClusterQueue {lq['spec']['clusterQueue']} doesn't exist", host_pod)
    ns_labels = {**fleet.namespace(namespace)["metadata"]["labels"], "kubernetes.io/metadata.name": namespace}
    wanted = cq["spec"].get("namespaceSelector", {}).get("matchLabels", {})
    if any(ns_labels.get(k) != v for k, v in wanted.items()):
        return StepResult(False, f"namespace {namespace} does not match ClusterQueue's namespaceSelector", host_pod)
    if cq["spec"].get("stopPolicy") in ("Hold", "HoldAndDrain"):
        return StepResult(False, f"ClusterQueue {cq['metadata']['name']} is inactive", host_pod)
    priority = labels.get(PRIORITY_LABEL)
    if priority and fleet.one("WorkloadPriorityClass", priority) is None:
        return StepResult(False, f"workloadPriorityClass {priority} not found", host_pod)
    size = _group_size(host_pod)
    requests = {name: value * size for name, value in requests_of(host_pod).items()}
    groups = cq["spec"]["resourceGroups"]
    assigned: dict[str, str] = {}
    ignore_undeclared = quota_check_strategy(fleet) == IGNORE_UNDECLARED
    for name in list(requests):
        if not any(name in g["coveredResources"] for g in groups):
            if requests[name] == 0 or ignore_undeclared:
                del requests[name]  # left out of admission and of the queue's usage
                continue
            return StepResult(False, "couldn't assign flavors to pod set main: "
                              f"resource {name} unavailable in ClusterQueue", host_pod)
    pod = copy.deepcopy(host_pod)
    flavors = {f["name"]: (fleet.one("ResourceFlavor", f["name"]) or {}).get("spec") or {}
               for g in groups for f in g["flavors"]}
    tas_flavors = {name for name, spec in flavors.items() if spec.get("topologyName")}
    explicit = any(a in host_pod["metadata"].get("annotations", {}) for a in TOPOLOGY_ANNOTATIONS)
    tas_only = bool(flavors) and set(flavors) == tas_flavors  # clusterqueue.go:741-750
    tas_requested = explicit or tas_only
    for group in groups:
        asked = {r: v for r, v in requests.items() if r in group["coveredResources"]}
        if not asked:
            continue
        misses = []
        for flavor in group["flavors"]:
            refusal = (tas_mismatch(tas_requested, tas_only and not explicit, flavor["name"], flavors[flavor["name"]],
                                    group["coveredResources"], requests)
                       or flavor_mismatch(host_pod, flavor["name"], flavors[flavor["name"]]))
            if refusal:
                misses.append(refusal)
                continue
            quota = {r["name"]: r for r in flavor["resources"]}
            caps = {r: _maximum(fleet, cq, flavor["name"], quota[r]) for r in asked}
            over = [(r, v, caps[r]) for r, v in asked.items() if v > caps[r]]
            if not over:
                for r in asked:
                    assigned[r] = flavor["name"]
                rf = (fleet.one("ResourceFlavor", flavor["name"]) or {}).get("spec") or {}
                pod["spec"]["nodeSelector"] = {**pod["spec"].get("nodeSelector", {}), **rf.get("nodeLabels", {})}
                pod["spec"]["tolerations"] = [*pod["spec"].get("tolerations", []), *rf.get("tolerations", [])]
                break
            r, v, cap = over[0]
            misses.append(f"insufficient quota for {r} in flavor {flavor['name']}, previously considered "
                          f"podsets requests (0) + current podset request ({v:g}) > maximum capacity ({cap:g})")
        else:
            return StepResult(False, "couldn't assign flavors to pod set main: " + ", ".join(sorted(misses)),
                              host_pod)
    topology = None
    if tas_requested:
        used = sorted({assigned[r] for r in assigned if assigned[r] in tas_flavors})
        if not used:
            return StepResult(False, "couldn't assign flavors to pod set main: no TAS flavor assigned", host_pod)
        if len(used) > 1:
            return StepResult(False, "couldn't assign flavors to pod set main: more than one TAS flavor assigned: "
                              + ", ".join(used), host_pod)
        delayed = set(cq["spec"].get("admissionChecks") or []) & set(getattr(fleet, "delaying_checks", ()))
        if not delayed:
            spec = flavors[used[0]]
            fits = tas_fit(host_pod, spec, fleet)
            if fits < size:
                name = spec["topologyName"]
                text = (f'topology "{name}" doesn\'t allow to fit any of {size} pod(s)' if fits == 0
                        else f'topology "{name}" allows to fit only {fits} out of {size} pod(s)')
                return StepResult(False, f"couldn't assign flavors to pod set main: {text}", host_pod)
        topology = used[0]
    # prepare() (pod_controller.go:1551-1563): the admission gate goes; the topology gate too unless TAS placed
    # the pod (then Kueue's TopologyUngater lifts it once the assignment is written).
    pod["spec"]["schedulingGates"] = [g for g in pod["spec"]["schedulingGates"]
                                      if g["name"] not in (GATE, TOPOLOGY_GATE)]
    return StepResult(True, f"admitted by ClusterQueue {cq['metadata']['name']}", pod,
                      {"admitted": True, "cluster_queue": cq["metadata"]["name"], "flavors": assigned,
                       "group_size": size, "topology_flavor": topology})


BLOCK_UNDECLARED, IGNORE_UNDECLARED = "BlockUndeclared", "IgnoreUndeclared"


def quota_check_strategy(fleet: Any) -> str:
    """The Configuration's resources.quotaCheckStrategy as the Kueue release sets it (chart
    managerConfig.controllerManagerConfigYaml), effective only with the QuotaCheckStrategy gate on (default
    on since v0.19: pkg/features/kube_features.go:871-874, flavorassigner.go:294-296). Unset, or the gate off,
    it is BlockUndeclared (cmd/kueue/main.go:730-736), also for a fleet without a Kueue release."""
    import yaml

    release = fleet.one("HelmRelease", "kueue", "flux-system") if hasattr(fleet, "one") else None
    values = (release or {}).get("spec", {}).get("values") or {}
    gates = (values.get("controllerManager") or {}).get("featureGates") or []
    if not next((g.get("enabled", True) for g in gates if g.get("name") == "QuotaCheckStrategy"), True):
        return BLOCK_UNDECLARED
    config = yaml.safe_load((values.get("managerConfig") or {}).get("controllerManagerConfigYaml") or "") or {}
    return (config.get("resources") or {}).get("quotaCheckStrategy") or BLOCK_UNDECLARED


def selector_matches(pod: dict[str, Any], node_labels: dict[str, str]) -> bool:
    """flavorSelector (flavorassigner.go:1278-1322) matched against the flavor's nodeLabels (:1246-1253): the
    pod's nodeSelector and required node-affinity expressions on the flavor's own label keys only (:1227);
    an affinity term with none of them left makes the affinity match any flavor (terms are ORed)."""
    from .scheduler import term_matches

    keys = set(node_labels)
    spec = pod["spec"]
    if any(node_labels[k] != v for k, v in (spec.get("nodeSelector") or {}).items() if k in keys):
        return False
    terms = ((((spec.get("affinity") or {}).get("nodeAffinity") or {})
              .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or [])
    kept = []
    for term in terms:
        expressions = [e for e in term.get("matchExpressions") or [] if e["key"] in keys]
        if not expressions:
            return True
        kept.append({"matchExpressions": expressions})
    return not kept or any(term_matches(t, node_labels) for t in kept)


def flavor_mismatch(pod: dict[str, Any], name: str, spec: dict[str, Any]) -> str:
    """checkFlavorForPodSets without TAS (flavorassigner.go:1237-1255): "" when the flavor may serve the pod."""
    from .scheduler import tolerates

    tolerations = [*pod["spec"].get("tolerations", []), *spec.get("tolerations", [])]
    for taint in spec.get("nodeTaints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(tolerations, taint):
            # Go's %s of a corev1.Taint value: {Key Value Effect TimeAdded}.
            shown = f"{{{taint['key']} {taint.get('value', '')} {taint['effect']} <nil>}}"
            return f"untolerated taint {shown} in flavor {name}"
    if not selector_matches(pod, spec.get("nodeLabels") or {}):
        return f"flavor {name} doesn't match node affinity"
    return ""


def tas_mismatch(requested: bool, implied: bool, name: str, spec: dict[str, Any], covered: list[str],
                 requests: dict[str, float]) -> str:
    """checkPodSetAndFlavorMatchForTAS (tas_flavorassigner.go:166-204): "" when the flavor may serve the pod set."""
    if requested:
        if implied:
            return ""
        if not spec.get("topologyName"):
            if not any(r in covered for r in requests):
                return ""
            return f'Flavor "{name}" does not support TopologyAwareScheduling'
        return ""
    if spec.get("topologyName"):
        return f'Flavor "{name}" supports only TopologyAwareScheduling'
    return ""


def _tolerates_all(tolerations: list[dict[str, Any]], taints: list[dict[str, Any]]) -> bool:
    from .scheduler import tolerates

    return all(tolerates(tolerations, t) for t in taints if t.get("effect") in ("NoSchedule", "NoExecute"))


def tas_fit(pod: dict[str, Any], flavor: dict[str, Any], fleet: Any) -> int:
    """How many of the pod set's pods the existing nodes hold: nodes with the flavor's nodeLabels and every
    level of its Topology, whose taints the flavor's and the pod's tolerations cover, by allocatable."""
    topo = fleet.one("Topology", flavor["topologyName"])
    levels = [lvl["nodeLabel"] for lvl in (topo or {}).get("spec", {}).get("levels", [])]
    wanted = flavor.get("nodeLabels") or {}
    tolerations = [*pod["spec"].get("tolerations", []), *flavor.get("tolerations", [])]
    single = requests_of(pod)
    total = 0
    for node in getattr(fleet, "nodes", []):
        labels = node["metadata"].get("labels", {})
        if any(labels.get(k) != v for k, v in wanted.items()) or any(lvl not in labels for lvl in levels):
            continue
        if not _tolerates_all(tolerations, node.get("spec", {}).get("taints", [])):
            continue
        allocatable = {k: quantity(v) for k, v in node.get("status", {}).get("allocatable", {}).items()}
        per_node = min((int(allocatable.get(r, 0) // v) for r, v in single.items() if v > 0), default=0)
        total += per_node
    return total


def _maximum(fleet: Any, cq: dict[str, Any], flavor: str, resource: dict[str, Any]) -> float:
    """nominalQuota + borrowingLimit; without a borrowing limit, up to the whole cohort's nominal quota of
    that flavor and resource (every queue starts empty, so everything is lendable)."""
    own = quantity(resource["nominalQuota"])
    if "borrowingLimit" in resource:
        return own + quantity(resource["borrowingLimit"])
    cohort = cq["spec"].get("cohortName")
    if not cohort:
        return own
    total = 0.0
    for other in fleet.objects("ClusterQueue"):
        if other["spec"].get("cohortName") != cohort:
            continue
        for group in other["spec"]["resourceGroups"]:
            for f in group["flavors"]:
                if f["name"] == flavor:
                    total += sum(quantity(r["nominalQuota"]) for r in f["resources"] if r["name"] == resource["name"])
    return max(own, total)
