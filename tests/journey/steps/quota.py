"""The ResourceQuota admission plugin (kubernetes v1.33, plugin/pkg/admission/resourcequota and
pkg/quota/v1/evaluator/core/pods.go): a pod is charged at creation (gated or not) for `pods` and
`requests.<resource>` (extended resources only under the `requests.` prefix); over `hard` it is refused:
`exceeded quota: <name>, requested: <r>=<n>, used: <r>=<u>, limited: <r>=<h>`. `fleet.used` stands in
for what the namespace already runs."""

from __future__ import annotations

from typing import Any

from . import StepResult, quantity, requests_of


def admit(host_pod: dict[str, Any], fleet: Any) -> StepResult:
    namespace = host_pod["metadata"]["namespace"]
    charge = {f"requests.{name}": value for name, value in requests_of(host_pod).items()}
    charge["pods"] = 1
    used = fleet.used.get(namespace, {})
    for rq in fleet.objects("ResourceQuota", namespace):
        for key, hard in rq["spec"]["hard"].items():
            if key in charge and used.get(key, 0) + charge[key] > quantity(hard):
                return StepResult(False, f'pods "{host_pod["metadata"]["name"]}" is forbidden: exceeded quota: '
                                  f'{rq["metadata"]["name"]}, requested: {key}={charge[key]:g}, '
                                  f'used: {key}={used.get(key, 0):g}, limited: {key}={hard}', host_pod)
    return StepResult(True, "within the namespace's ResourceQuota", host_pod)
