"""Which Karpenter NodePool could create a node for a pending host pod. A model, not Karpenter.

Facts modelled (kubernetes-sigs/karpenter, tag v1.14.1):
- `pkg/controllers/provisioning/scheduling/nodeclaimtemplate.go` / `scheduler.go`: a NodePool's
  requirements are its `spec.template.spec.requirements` plus one `In [value]` requirement per
  template label; NodePools are tried by descending `spec.weight`, then name.
- `pkg/scheduling/taints.go` (`Taints.ToleratesPod`): the pod must tolerate every template taint
  (NoSchedule/NoExecute); startup taints are not considered for scheduling.
- `pkg/scheduling/requirements.go` (`Requirements.Compatible` with `AllowUndefinedWellKnownLabels`):
  a pod requirement on a custom label (not in `WellKnownLabels`) must be defined by the pool unless
  its operator is NotIn/DoesNotExist -- else "label %q does not have known values"; keys both sides
  define must intersect.
- `pkg/apis/v1/labels.go`: `WellKnownLabels` = karpenter.sh/nodepool, topology.kubernetes.io/zone,
  topology.kubernetes.io/region, node.kubernetes.io/instance-type, kubernetes.io/arch, kubernetes.io/os,
  karpenter.sh/capacity-type, node.kubernetes.io/windows-build.
- `pkg/controllers/provisioning/provisioner.go`: a pool whose `spec.limits` are already exhausted
  is skipped; a limit of 0 for a resource the pod needs can never launch.
- `pkg/controllers/provisioning/scheduling/nodeclaim.go` (instance type filtering, "incompatible with
  all instance types"): the pod's requests must fit an instance type's capacity. Cloud providers
  advertise `nvidia.com/gpu` on GPU instance types and nothing for MIG slices or HAMi shares; a
  NodeOverlay (`karpenter.sh/v1alpha1`, feature gate NodeOverlay) whose requirements match the pool
  appends extended `capacity` to its instance types.
Pod requirements come from `nodeSelector` and the first required node-affinity term (Karpenter tries
terms in order; one is enough for a model of the pods we render).

Modelled beyond Karpenter (platform rule, issue 15 defect 6): a pool that would launch the pod but
does not pin the GPU model (an instance-type or GPU-name requirement) is refused -- Karpenter would
pick any GPU instance that fits.
"""

from __future__ import annotations

import copy
from typing import Any

from . import StepResult

WELL_KNOWN = frozenset({
    "karpenter.sh/nodepool", "topology.kubernetes.io/zone", "topology.kubernetes.io/region",
    "node.kubernetes.io/instance-type", "kubernetes.io/arch", "kubernetes.io/os", "karpenter.sh/capacity-type",
    "node.kubernetes.io/windows-build",
})
GPU_MODEL_KEYS = ("node.kubernetes.io/instance-type", "karpenter.k8s.aws/instance-gpu-name")
GPU_RESOURCE_PREFIX = "nvidia.com/"
Requirement = tuple[str, set[str]]  # operator, values


def manifests_of(fleet: Any) -> list[dict[str, Any]]:
    return list(getattr(fleet, "manifests", fleet))


def pod_requirements(pod: dict[str, Any]) -> dict[str, Requirement]:
    spec = pod.get("spec", {})
    reqs: dict[str, Requirement] = {k: ("In", {v}) for k, v in (spec.get("nodeSelector") or {}).items()}
    terms = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
             .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or []
    for expr in (terms[0].get("matchExpressions", []) if terms else []):
        reqs[expr["key"]] = (expr["operator"], set(expr.get("values", [])))
    return reqs


def pool_requirements(pool: dict[str, Any]) -> dict[str, Requirement]:
    template = pool["spec"]["template"]
    reqs: dict[str, Requirement] = {
        r["key"]: (r["operator"], set(r.get("values", []))) for r in template["spec"].get("requirements", [])
    }
    for key, value in (template.get("metadata", {}).get("labels") or {}).items():
        reqs[key] = ("In", {value})
    reqs["karpenter.sh/nodepool"] = ("In", {pool["metadata"]["name"]})
    return reqs


def _as_set(requirement: Requirement) -> tuple[bool, set[str]]:
    """Karpenter's Requirement as (complement, values) (pkg/scheduling/requirement.go, v1.14.1): In -> the
    values, NotIn -> everything but them, Exists -> everything, DoesNotExist -> nothing."""
    operator, values = requirement
    if operator == "In":
        return False, set(values)
    if operator == "NotIn":
        return True, set(values)
    if operator == "Exists":
        return True, set()
    return False, set()  # DoesNotExist


def _has_intersection(a: Requirement, b: Requirement) -> bool:
    (comp_a, va), (comp_b, vb) = _as_set(a), _as_set(b)
    if comp_a and comp_b:
        return True
    if comp_a:
        return bool(vb - va)
    if comp_b:
        return bool(va - vb)
    return bool(va & vb)


def _intersects(existing: Requirement, incoming: Requirement) -> bool:
    """Requirements.Intersects for one key both sides define (pkg/scheduling/requirements.go:254-276): the
    sets must intersect, except that two "absent" requirements (NotIn/DoesNotExist on both sides) agree."""
    if _has_intersection(existing, incoming):
        return True
    absent = ("NotIn", "DoesNotExist")
    return incoming[0] in absent and existing[0] in absent


def incompatibility(pool: dict[str, Any], pod: dict[str, Any]) -> str | None:
    """Karpenter's Compatible(): None when compatible, else the reason."""
    have = pool_requirements(pool)
    for key, (operator, _) in pod_requirements(pod).items():
        if key in WELL_KNOWN or key in have or operator in ("NotIn", "DoesNotExist"):
            continue
        return f'label "{key}" does not have known values'
    for key, incoming in pod_requirements(pod).items():
        if key in have and not _intersects(have[key], incoming):
            return f"key {key}, {incoming[0]} {sorted(incoming[1])} not in {have[key][0]} {sorted(have[key][1])}"
    return None


def _tolerates(toleration: dict[str, Any], taint: dict[str, Any]) -> bool:
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("operator") == "Exists":
        return not toleration.get("key") or toleration["key"] == taint["key"]
    return toleration.get("key") == taint["key"] and toleration.get("value", "") == taint.get("value", "")


def untolerated(pool: dict[str, Any], pod: dict[str, Any]) -> dict[str, Any] | None:
    tolerations = pod.get("spec", {}).get("tolerations") or []
    for taint in pool["spec"]["template"]["spec"].get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not any(_tolerates(t, taint) for t in tolerations):
            return taint
    return None


def gpu_requests(pod: dict[str, Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for container in pod.get("spec", {}).get("containers", []):
        resources = container.get("resources", {})
        for name, value in {**resources.get("requests", {}), **resources.get("limits", {})}.items():
            if name.startswith(GPU_RESOURCE_PREFIX):
                out[name] = out.get(name, 0) + int(value)
    return out


def limit_problem(pool: dict[str, Any], pod: dict[str, Any]) -> str | None:
    """Karpenter counts a new node's full capacity against `limits`; a node brings the instance type's
    GPUs (the cloud provider knows them; here the pool's gpufleet.io/gpus-per-node annotation stands in)."""
    limits = pool["spec"].get("limits") or {}
    if "nvidia.com/gpu" not in limits or not gpu_requests(pod):
        return None
    per_node = int(pool["metadata"].get("annotations", {}).get("gpufleet.io/gpus-per-node", "1"))
    whole = gpu_requests(pod).get("nvidia.com/gpu", 1)
    needed = max(per_node, whole)
    if int(limits["nvidia.com/gpu"]) < needed:
        return f"limit nvidia.com/gpu={limits['nvidia.com/gpu']} is below one node's {needed} GPUs"
    return None


def overlay_capacity(pool: dict[str, Any], fleet: Any) -> dict[str, int]:
    """Extended capacity NodeOverlays add to this pool's instance types (highest weight wins per resource)."""
    reqs = pool_requirements(pool)
    overlays = sorted((m for m in manifests_of(fleet) if m.get("kind") == "NodeOverlay"),
                      key=lambda o: int(o["spec"].get("weight", 0)))
    out: dict[str, int] = {}
    for overlay in overlays:
        wanted = {r["key"]: (r["operator"], set(r.get("values", []))) for r in overlay["spec"]["requirements"]}
        if all(key in reqs and _intersects(reqs[key], want) for key, want in wanted.items()):
            out.update({k: int(v) for k, v in overlay["spec"].get("capacity", {}).items()})
    return out


def capacity_problem(pool: dict[str, Any], pod: dict[str, Any], fleet: Any) -> str | None:
    extra = overlay_capacity(pool, fleet)
    for resource, amount in gpu_requests(pod).items():
        if resource == "nvidia.com/gpu":
            continue  # every GPU instance type advertises it (the GPU-model requirement picks which)
        if extra.get(resource, 0) < amount:
            return f"incompatible with all instance types: no capacity for {resource}={amount} (NodeOverlay)"
    return None


def pins_gpu_model(pool: dict[str, Any]) -> bool:
    keys = {r["key"] for r in pool["spec"]["template"]["spec"].get("requirements", []) if r["operator"] == "In"}
    return any(key in keys for key in GPU_MODEL_KEYS)


def node_pools(fleet: Any) -> list[dict[str, Any]]:
    pools = [m for m in manifests_of(fleet) if m.get("kind") == "NodePool"]
    return sorted(pools, key=lambda p: (-int(p["spec"].get("weight", 0)), p["metadata"]["name"]))


def step(host_pod: dict[str, Any], fleet: Any) -> StepResult:
    """The first NodePool that could create a node for `host_pod`, or every pool's reason for refusing."""
    refusals: list[str] = []
    for pool in node_pools(fleet):
        name = pool["metadata"]["name"]
        taint = untolerated(pool, host_pod)
        if taint is not None:
            refusals.append(f"{name}: did not tolerate {taint['key']}={taint.get('value', '')}:{taint['effect']}")
            continue
        problem = (incompatibility(pool, host_pod) or limit_problem(pool, host_pod)
                   or capacity_problem(pool, host_pod, fleet))
        if problem:
            refusals.append(f"{name}: {problem}")
            continue
        if not pins_gpu_model(pool):
            refusals.append(f"{name}: no instance-type/GPU-name requirement, Karpenter may launch any GPU")
            continue
        pod = copy.deepcopy(host_pod)
        pod.setdefault("metadata", {}).setdefault("annotations", {})["gpufleet.io/journey-nodepool"] = name
        labels = dict(pool["spec"]["template"]["metadata"].get("labels", {}))
        pod["metadata"]["annotations"]["gpufleet.io/journey-node-labels"] = ",".join(
            f"{k}={v}" for k, v in sorted(labels.items()))
        return StepResult(True, f"NodePool {name} can launch a node for it", pod)
    reason = "; ".join(refusals) if refusals else "no NodePool exists"
    return StepResult(False, f"Karpenter cannot launch a node: {reason}", host_pod)


def node_labels(result: StepResult) -> dict[str, str]:
    """The template labels of the node the chosen pool would create (for later steps, e.g. TAS)."""
    text = result.pod.get("metadata", {}).get("annotations", {}).get("gpufleet.io/journey-node-labels", "")
    return dict(item.split("=", 1) for item in text.split(",") if item)
