"""Where the pod is bound (kube-scheduler semantics, v1.33) -- and, for a pod no node takes, which Karpenter
NodePool creates the node it is then bound to.

* A pod with scheduling gates is not scheduled (`SchedulingGated`) and never becomes PodScheduled=Unschedulable,
  so Karpenter, which provisions only for unschedulable pods (kubernetes-sigs/karpenter@v1.14.1:
  pkg/utils/pod/scheduling.go:102-132), never launches a node for it.
* A pod is bound only by the scheduler its `schedulerName` names; a name no running scheduler answers to
  leaves it Pending forever. `fleet.schedulers` are the ones installed.
* Filters on a node: NodeAffinity (every `nodeSelector` entry equals a node label, and one of the required
  node-affinity terms matches) and TaintToleration (every NoSchedule/NoExecute taint tolerated; k8s.io/api
  core/v1 toleration.go `ToleratesTaint`: an effect, when given, must match; an empty key with Exists matches
  every key; Exists ignores the value, Equal compares it). Resources are not modelled on existing nodes.
* `fleet.nodes` are the nodes that exist (a new cluster: its system nodes, no GPU node); when none fits, the
  pod is Unschedulable and Karpenter's model (steps/karpenter.py) names the NodePool whose node it gets.
"""

from __future__ import annotations

from typing import Any

from . import StepResult, karpenter


def tolerates(tolerations: list[dict[str, Any]], taint: dict[str, Any]) -> bool:
    for t in tolerations:
        if t.get("effect") and t["effect"] != taint.get("effect"):
            continue
        if not t.get("key"):
            if t.get("operator") == "Exists":
                return True
            continue
        if t["key"] != taint.get("key"):
            continue
        if t.get("operator") == "Exists" or t.get("value", "") == taint.get("value", ""):
            return True
    return False


def term_matches(term: dict[str, Any], labels: dict[str, str]) -> bool:
    """One node-selector term (its expressions ANDed) against a node's labels; Gt/Lt compare integers
    (k8s.io/apimachinery labels.Requirement.Matches: a missing or non-integer label does not match)."""
    for expr in term.get("matchExpressions", []):
        key, op, values = expr["key"], expr["operator"], expr.get("values", [])
        present = key in labels
        if op == "In" and not (present and labels[key] in values):
            return False
        if op == "NotIn" and present and labels[key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
        if op in ("Gt", "Lt"):
            try:
                have, bound = int(labels[key]), int(values[0])
            except (KeyError, IndexError, ValueError):
                return False
            if (have <= bound) if op == "Gt" else (have >= bound):
                return False
    return True


def node_refusal(pod: dict[str, Any], node: dict[str, Any]) -> str:
    """"" when the node passes NodeAffinity and TaintToleration for the pod, else the filter's reason."""
    labels = node["metadata"].get("labels", {})
    spec = pod["spec"]
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return "didn't match Pod's node affinity/selector"
    terms = ((((spec.get("affinity") or {}).get("nodeAffinity") or {})
              .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or [])
    if terms and not any(term_matches(t, labels) for t in terms):
        return "didn't match Pod's node affinity/selector"
    for taint in node.get("spec", {}).get("taints", []):
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(spec.get("tolerations") or [], taint):
            return f"had untolerated taint {{{taint['key']}: {taint.get('value', '')}}}"
    return ""


def bind(host_pod: dict[str, Any], fleet: Any) -> StepResult:
    gates = [g["name"] for g in host_pod["spec"].get("schedulingGates", [])]
    if gates:
        return StepResult(False, f"SchedulingGated: waiting for {gates} (never Unschedulable, so Karpenter "
                          "launches nothing for it)", host_pod)
    name = host_pod["spec"].get("schedulerName", "default-scheduler")
    if name not in fleet.schedulers:
        return StepResult(False, f"Pending: no scheduler named {name} runs in the cluster", host_pod)
    facts = {"scheduler": name, "nodeSelector": host_pod["spec"].get("nodeSelector", {}),
             "tolerations": host_pod["spec"].get("tolerations", [])}
    nodes = list(getattr(fleet, "nodes", []))
    reasons: dict[str, int] = {}
    for node in nodes:
        refusal = node_refusal(host_pod, node)
        if not refusal:
            return StepResult(True, f"bound by {name} to node {node['metadata']['name']}", host_pod,
                              {**facts, "node": node["metadata"]["name"], "node_pool": None})
        reasons[refusal] = reasons.get(refusal, 0) + 1
    provisioned = karpenter.step(host_pod, fleet)
    if provisioned.ok:
        pool = provisioned.pod["metadata"]["annotations"]["gpufleet.io/journey-nodepool"]
        return StepResult(True, f"Unschedulable on the {len(nodes)} existing node(s); Karpenter launches a node "
                          f"of NodePool {pool}; bound by {name}", provisioned.pod,
                          {**facts, "node": None, "node_pool": pool})
    summary = ", ".join(f"{n} node(s) {r}" for r, n in sorted(reasons.items()))
    return StepResult(False, f"0/{len(nodes)} nodes are available: {summary or 'no nodes'}; {provisioned.reason}",
                      host_pod, facts)
