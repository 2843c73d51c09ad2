"""Kueue v0.19.2: the pod integration's webhook and the admission of the pod's Workload.

Facts modelled (kubernetes-sigs/kueue tag v0.19.2):
* pkg/controller/jobs/pod/pod_webhook.go: a pod is managed when it carries `kueue.x-k8s.io/queue-name`
  (we run `manageJobsWithoutQueueName: false`); a managed pod gets the scheduling gate
  `kueue.x-k8s.io/admission`. Pods in kube-system/kueue-system are never managed.
* LocalQueueDefaulting (GA in v0.19, pkg/controller/jobframework/defaults.go): a pod without the label
  in a namespace that has a LocalQueue named `default` is labelled `queue-name: default`.
* Pod groups (site/content/en/docs/tasks/run/plain_pods.md): pods labelled
  `kueue.x-k8s.io/pod-group-name` with annotation `kueue.x-k8s.io/pod-group-total-count: N` are one
  Workload, admitted all together. A Job inside a vCluster reaches the host only as its pods (the syncer
  syncs pods, not Jobs), so a gang on the host is a pod group.
* Admission (pkg/scheduler/flavorassigner/flavorassigner.go; messages from crds/kueue/
  workload-conditions.md): the LocalQueue must exist ("LocalQueue %s doesn't exist"), the ClusterQueue's
  namespaceSelector must match, every requested resource must be covered (quotaCheckStrategy
  BlockUndeclared: "resource %s unavailable in ClusterQueue"), flavors are tried in order within each
  resource group and a flavor fits when the request is within nominalQuota + borrowingLimit ("insufficient
  quota for %s in flavor %s, ... > maximum capacity (%s)"). On admission the gate is removed and the
  flavor's nodeLabels/tolerations are added to the pod.
Not modelled: usage by other workloads (every queue starts empty), preemption, fair sharing, TAS.
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
    pod["spec"]["schedulingGates"] = [*pod["spec"].get("schedulingGates", []), {"name": GATE}]
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
            return StepResult(True, "runs WITHOUT Kueue admission: its gate was removed before admission",
                              host_pod, {"admitted": False, "bypassed": True})
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
    for name in requests:
        if not any(name in g["coveredResources"] for g in groups):
            return StepResult(False, "couldn't assign flavors to pod set main: "
                              f"resource {name} unavailable in ClusterQueue", host_pod)
    pod = copy.deepcopy(host_pod)
    for group in groups:
        asked = {r: v for r, v in requests.items() if r in group["coveredResources"]}
        if not asked:
            continue
        misses = []
        for flavor in group["flavors"]:
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
            return StepResult(False, "couldn't assign flavors to pod set main: " + ", ".join(misses), host_pod)
    pod["spec"]["schedulingGates"] = [g for g in pod["spec"]["schedulingGates"] if g["name"] != GATE]
    return StepResult(True, f"admitted by ClusterQueue {cq['metadata']['name']}", pod,
                      {"admitted": True, "cluster_queue": cq["metadata"]["name"], "flavors": assigned,
                       "group_size": size})


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
