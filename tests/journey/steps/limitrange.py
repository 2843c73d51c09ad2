"""The LimitRanger admission plugin (kubernetes v1.33, plugin/pkg/admission/limitranger/admission.go):
a container without a limit gets the LimitRange's `default`, without a request its `defaultRequest`
(or its limit); then a container over `max`, or with no limit for a resource that has a `max`, is
refused ("maximum <r> usage per Container is <max>, but limit is <l>" / "... No limit is specified")."""

from __future__ import annotations

import copy
from typing import Any

from . import StepResult, quantity


def admit(host_pod: dict[str, Any], fleet: Any) -> StepResult:
    pod = copy.deepcopy(host_pod)
    namespace = pod["metadata"]["namespace"]
    for lr in fleet.objects("LimitRange", namespace):
        for item in lr["spec"]["limits"]:
            if item.get("type") != "Container":
                continue
            for c in [*pod["spec"].get("initContainers", []), *pod["spec"]["containers"]]:
                res = c.setdefault("resources", {})
                limits, requests = res.setdefault("limits", {}), res.setdefault("requests", {})
                for name, value in item.get("default", {}).items():
                    limits.setdefault(name, value)
                for name, value in item.get("defaultRequest", {}).items():
                    requests.setdefault(name, limits.get(name, value))
                for name, ceiling in item.get("max", {}).items():
                    if name not in limits:
                        return StepResult(False, f"maximum {name} usage per Container is {ceiling}. "
                                          "No limit is specified", pod)
                    if quantity(limits[name]) > quantity(ceiling):
                        return StepResult(False, f"maximum {name} usage per Container is {ceiling}, "
                                          f"but limit is {limits[name]}", pod)
    return StepResult(True, "LimitRange defaults applied", pod)
