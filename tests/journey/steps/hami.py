"""HAMi v2.10.0's mutating webhook (Project-HAMi/HAMi pkg/scheduler/webhook.go, the NVIDIA device's
MutateAdmission in pkg/device/nvidia/device.go; chart charts/hami/templates/scheduler/webhook.yaml;
notes in shared/reference/dcgm/hami.md).

Facts modelled:
* The chart's MutatingWebhookConfiguration (webhook `vgpu.hami.io`) skips namespaces labelled
  `hami.io/webhook: ignore` (namespaceSelector) and pods labelled so (objectSelector); its
  `reinvocationPolicy` is a chart value (`scheduler.admissionWebhook.reinvocationPolicy`).
* A pod that already names another scheduler is left alone ("pod already has different scheduler
  assigned"); `default-scheduler` is overwritten (chart default forceOverwriteDefaultScheduler).
* A container asking for `nvidia.com/gpu` (HAMi's default resourceName) or a HAMi share resource is
  HAMi's: a share without `nvidia.com/gpu` gets `nvidia.com/gpu: 1` (defaultGPUNum); a container with
  no memory share and no `nvidia.com/gpucores` gets `nvidia.com/gpucores: 100` (exclusive card, the
  behaviour issue 15 observed); a privileged container with such resources is denied.
* The pod's schedulerName becomes `hami-scheduler`.
"""

from __future__ import annotations

import copy
from typing import Any

from . import StepResult

IGNORE = ("hami.io/webhook", "ignore")
SCHEDULER = "hami-scheduler"
GPU = "nvidia.com/gpu"
MEMORY = ("nvidia.com/gpumem", "nvidia.com/gpumem-percentage")
CORES = "nvidia.com/gpucores"


def webhook(host_pod: dict[str, Any], fleet: Any) -> StepResult:
    namespace = fleet.namespace(host_pod["metadata"]["namespace"])
    if namespace["metadata"]["labels"].get(IGNORE[0]) == IGNORE[1]:
        return StepResult(True, "HAMi webhook not called (namespace hami.io/webhook=ignore)", host_pod)
    if host_pod["metadata"].get("labels", {}).get(IGNORE[0]) == IGNORE[1]:
        return StepResult(True, "HAMi webhook not called (pod hami.io/webhook=ignore)", host_pod)
    name = host_pod["spec"].get("schedulerName", "")
    if name not in ("", "default-scheduler", SCHEDULER):
        return StepResult(True, "HAMi: pod already has different scheduler assigned", host_pod)
    pod = copy.deepcopy(host_pod)
    found = False
    for c in [*pod["spec"].get("initContainers", []), *pod["spec"]["containers"]]:
        limits = c.get("resources", {}).get("limits") or {}
        if not ({GPU, CORES, *MEMORY} & set(limits)):
            continue
        found = True
        if GPU not in limits:
            limits[GPU] = 1
        if CORES not in limits and not (set(MEMORY) & set(limits)):
            limits[CORES] = 100
        if (c.get("securityContext") or {}).get("privileged"):
            return StepResult(False, f"admission webhook \"vgpu.hami.io\" denied the request: container "
                              f"{c['name']} is privileged", pod)
    if not found:
        return StepResult(True, "HAMi: no GPU resource found", host_pod)
    pod["spec"]["schedulerName"] = SCHEDULER
    return StepResult(True, "HAMi webhook: scheduler set to hami-scheduler", pod, {"mutated": True})


# Project-HAMi/HAMi@v2.10.0:charts/hami/values.yaml:419-421: the device plugin's chart defaults (transcribed).
CHART_DEVICE_PLUGIN = {"nvidiaNodeSelector": {"gpu": "on"}, "tolerations": []}


def device_plugin_pod(fleet: Any, namespace: str = "flux-system") -> dict[str, Any]:
    """A pod of HAMi's device-plugin DaemonSet as the chart renders it from the platform's HAMi release:
    nodeSelector = devicePlugin.nvidiaNodeSelector and tolerations = devicePlugin.tolerations, each only if
    non-empty (charts/hami/templates/device-plugin/daemonsetnvidia.yaml:257-262), Helm merging our values over
    the chart's key by key."""
    from .vcluster_sync import _merge

    release = fleet.one("HelmRelease", "hami", namespace)
    assert release is not None, "no HAMi release rendered"
    values = _merge(CHART_DEVICE_PLUGIN, (release["spec"].get("values") or {}).get("devicePlugin") or {})
    spec: dict[str, Any] = {"containers": [{"name": "device-plugin"}]}
    if values.get("nvidiaNodeSelector"):
        spec["nodeSelector"] = dict(values["nvidiaNodeSelector"])
    if values.get("tolerations"):
        spec["tolerations"] = list(values["tolerations"])
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "vgpu-device-plugin-x", "namespace": "hami-system"}, "spec": spec}


def pool_node(pool: dict[str, Any]) -> dict[str, Any]:
    """A node the NodePool creates: its template labels and taints."""
    template = pool["spec"]["template"]
    return {"kind": "Node", "metadata": {"name": f"{pool['metadata']['name']}-node",
                                         "labels": dict(template["metadata"].get("labels") or {})},
            "spec": {"taints": list(template["spec"].get("taints") or [])}}
