"""Which scheduler binds the pod (kube-scheduler semantics, v1.33): a pod with scheduling gates is not
scheduled (`SchedulingGated`); a pod is bound only by the scheduler its `schedulerName` names, so a name
no running scheduler answers to leaves it Pending forever. `fleet.schedulers` are the ones installed."""

from __future__ import annotations

from typing import Any

from . import StepResult


def bind(host_pod: dict[str, Any], fleet: Any) -> StepResult:
    gates = [g["name"] for g in host_pod["spec"].get("schedulingGates", [])]
    if gates:
        return StepResult(False, f"SchedulingGated: waiting for {gates}", host_pod)
    name = host_pod["spec"].get("schedulerName", "default-scheduler")
    if name not in fleet.schedulers:
        return StepResult(False, f"Pending: no scheduler named {name} runs in the cluster", host_pod)
    return StepResult(True, f"bound by {name}", host_pod,
                      {"scheduler": name, "nodeSelector": host_pod["spec"].get("nodeSelector", {}),
                       "tolerations": host_pod["spec"].get("tolerations", [])})
