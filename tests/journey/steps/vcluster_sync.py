"""vCluster v0.36.1's pod syncer, and the vCluster control plane's own pod (chart v0.36.1).

Facts modelled (loft-sh/vcluster tag v0.36.1):
* pkg/controllers/resources/pods/translate/translator.go: a virtual pod becomes a host pod in the
  vCluster's host namespace, named `<name>-x-<virtual namespace>-x-<release>`; its labels are kept and
  `vcluster.loft.sh/namespace` names the virtual namespace; its spec (containers, resources,
  schedulerName, tolerations, nodeSelector, scheduling gates) is copied; `sync.toHost.pods.
  enforceTolerations` are appended and `sync.fromHost.nodes.selector.labels` become a nodeSelector.
* pkg/controllers/resources/pods/translate/diff.go (`calcSpecDiff`): on every later sync the host pod's
  `spec.schedulingGates` is set to the virtual pod's. A gate a host webhook added (Kueue's
  `kueue.x-k8s.io/admission`) is therefore removed at the first resync: loft-sh/vcluster#4106, fix in
  PR #4107 (open). `resync` models that, unless the fleet runs a syncer image carrying the fix
  (`controlPlane.statefulSet.image`, GPUFLEET_VCLUSTER_SYNCER_IMAGE).
* chart/templates/statefulset.yaml + chart/values.yaml: the control plane pod runs the syncer container
  with `controlPlane.statefulSet.security.containerSecurityContext` (default `runAsUser: 0`), the pod
  with `...podSecurityContext`, and the distro's init container with `controlPlane.distro.k8s.
  securityContext`; Helm merges our values over the chart's defaults key by key.
The Kubernetes API server then defaults the host pod (pkg/apis/core/v1/defaults.go, v1.33): a
container's missing requests default to its limits, and schedulerName to `default-scheduler`.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from . import StepResult

RELEASE = "vcluster"
KUEUE_GATE = "kueue.x-k8s.io/admission"


def api_defaults(pod: dict[str, Any]) -> dict[str, Any]:
    pod = copy.deepcopy(pod)
    pod["spec"].setdefault("schedulerName", "default-scheduler")
    for c in [*pod["spec"].get("initContainers", []), *pod["spec"]["containers"]]:
        resources = c.setdefault("resources", {})
        for name, value in (resources.get("limits") or {}).items():
            resources.setdefault("requests", {}).setdefault(name, value)
    return pod


def translate(virtual_pod: dict[str, Any], host_namespace: str, fleet: Any) -> dict[str, Any]:
    """The host pod the syncer creates for `virtual_pod`, after the API server's defaulting."""
    values = fleet.vcluster_values(host_namespace)
    vns = virtual_pod["metadata"].get("namespace", "default")
    pod = copy.deepcopy(virtual_pod)
    pod["metadata"] = {
        "name": f"{virtual_pod['metadata']['name']}-x-{vns}-x-{RELEASE}",
        "namespace": host_namespace,
        "labels": {**virtual_pod["metadata"].get("labels", {}), "vcluster.loft.sh/namespace": vns},
        "annotations": dict(virtual_pod["metadata"].get("annotations", {})),
    }
    spec = pod["spec"]
    for entry in values.get("sync", {}).get("toHost", {}).get("pods", {}).get("enforceTolerations", []):
        key_value, _, effect = entry.partition(":")
        key, _, value = key_value.partition("=")
        spec.setdefault("tolerations", []).append(
            {"key": key, "operator": "Equal", "value": value, "effect": effect})
    nodes = values.get("sync", {}).get("fromHost", {}).get("nodes", {})
    if nodes.get("enabled") and nodes.get("selector", {}).get("labels"):
        spec["nodeSelector"] = {**spec.get("nodeSelector", {}), **nodes["selector"]["labels"]}
    return api_defaults(pod)


def syncer_keeps_host_gates(values: dict[str, Any]) -> bool:
    return bool(values.get("controlPlane", {}).get("statefulSet", {}).get("image"))


def diff_gates(host: list[dict[str, Any]], virtual_old: list[dict[str, Any]], virtual: list[dict[str, Any]],
               keeps_host_gates: bool) -> list[dict[str, Any]]:
    """The host pod's schedulingGates after the syncer's Diff. The pinned release copies the virtual pod's
    (loft-sh/vcluster@v0.36.1:pkg/controllers/resources/pods/translate/diff.go:163); a syncer with commit
    3a272b45a keeps the gates the virtual pod never had (external, e.g. Kueue's) after the virtual ones."""
    if not keeps_host_gates:
        return [dict(g) for g in virtual]
    previous = {g["name"] for g in virtual_old}
    names = {g["name"] for g in virtual}
    external = [g for g in host if g["name"] not in previous and g["name"] not in names]
    return [*(dict(g) for g in virtual), *(dict(g) for g in external)]


def resync(host_pod: dict[str, Any], fleet: Any) -> StepResult:
    """The syncer's next Diff of the pod (any status change triggers one); the tenant set no gates."""
    values = fleet.vcluster_values(host_pod["metadata"]["namespace"])
    gates = host_pod["spec"].get("schedulingGates", [])
    after = diff_gates(gates, [], [], syncer_keeps_host_gates(values))
    if after == gates:
        return StepResult(True, "host scheduling gates kept", host_pod)
    pod = copy.deepcopy(host_pod)
    pod["spec"]["schedulingGates"] = after
    return StepResult(True, f"vCluster syncer removed host gates {[g['name'] for g in gates]} "
                      "(loft-sh/vcluster#4106)", pod, {"gates_stripped": True})


def _merge(base: Any, override: Any) -> Any:
    """Helm's values merge: maps merge key by key, anything else replaces."""
    if isinstance(base, dict) and isinstance(override, dict):
        return {**base, **{k: _merge(base.get(k), v) for k, v in override.items()}}
    return copy.deepcopy(override)


def chart_defaults(reference_dir: Path) -> dict[str, Any]:
    return yaml.safe_load((reference_dir / "vcluster" / "values.yaml").read_text())


def control_plane_pod(host_namespace: str, fleet: Any, defaults: dict[str, Any]) -> dict[str, Any]:
    """The vCluster control plane's pod as the host StatefulSet controller creates it."""
    values = _merge(defaults, fleet.vcluster_values(host_namespace))
    sts = values["controlPlane"]["statefulSet"]
    distro = values["controlPlane"]["distro"]["k8s"]
    labels = {"app": "vcluster", "release": RELEASE, **sts.get("pods", {}).get("labels", {})}
    return api_defaults({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"{RELEASE}-0", "namespace": host_namespace, "labels": labels},
        "spec": {
            "securityContext": sts["security"].get("podSecurityContext") or {},
            "initContainers": [{"name": "kubernetes", "image": "ghcr.io/loft-sh/kubernetes",
                                "securityContext": distro.get("securityContext") or {},
                                "resources": distro.get("resources", {})}],
            "containers": [{"name": "syncer", "image": "ghcr.io/loft-sh/vcluster-pro",
                            "securityContext": sts["security"].get("containerSecurityContext") or {},
                            "resources": sts.get("resources", {})}],
        },
    })


# loft-sh/vcluster@v0.36.1:pkg/coredns/coredns.go:95-113 -- the CoreDNS container runs as the syncer's own
# UID/GID, or 1001 when the syncer runs as root.
DEFAULT_UID = 1001


def coredns_pod(host_namespace: str, fleet: Any, defaults: dict[str, Any]) -> dict[str, Any]:
    """The virtual cluster's CoreDNS pod as vCluster's template renders it from the tenant's values
    (loft-sh/vcluster@v0.36.1:pkg/coredns/template.go:203-268), in the virtual cluster's kube-system -- the
    syncer then makes the host pod of it (`translate`). Follows the template's conditionals: the pod's
    securityContext is `controlPlane.coredns.security.podSecurityContext`, else `{seccompProfile:
    RuntimeDefault}` when `policies.podSecurityStandard` is set, else none; the container's is
    `...containerSecurityContext`, else non-root as the syncer's UID, no escalation, drop ALL + add
    NET_BIND_SERVICE, read-only root; nodeSelector `kubernetes.io/os: linux` plus the deployment's."""
    values = _merge(defaults, fleet.vcluster_values(host_namespace))
    dns = values["controlPlane"]["coredns"]
    deployment, security = dns["deployment"], dns.get("security") or {}
    pod_sc = security.get("podSecurityContext") or (
        {"seccompProfile": {"type": "RuntimeDefault"}} if (values.get("policies") or {}).get("podSecurityStandard")
        else None)
    syncer_sc = (values["controlPlane"]["statefulSet"].get("security") or {}).get("containerSecurityContext") or {}
    uid = syncer_sc.get("runAsUser") or DEFAULT_UID
    gid = syncer_sc.get("runAsGroup") or DEFAULT_UID
    container_sc = security.get("containerSecurityContext") or {
        "runAsNonRoot": True, "runAsUser": uid, "runAsGroup": gid, "allowPrivilegeEscalation": False,
        "capabilities": {"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]}, "readOnlyRootFilesystem": True}
    spec: dict[str, Any] = {
        "priorityClassName": dns.get("priorityClassName", ""),
        "serviceAccountName": "coredns",
        "nodeSelector": {"kubernetes.io/os": "linux", **(deployment.get("nodeSelector") or {})},
        "containers": [{"name": "coredns", "image": deployment.get("image") or "coredns/coredns",
                        "resources": copy.deepcopy(deployment.get("resources") or {}),
                        "securityContext": copy.deepcopy(container_sc)}],
    }
    if pod_sc:
        spec["securityContext"] = copy.deepcopy(pod_sc)
    if deployment.get("tolerations"):
        spec["tolerations"] = copy.deepcopy(deployment["tolerations"])
    labels = {"k8s-app": "vcluster-kube-dns", **((deployment.get("pods") or {}).get("labels") or {})}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "coredns-5d8c6b6c7-abcde", "namespace": "kube-system", "labels": labels},
            "spec": spec}
