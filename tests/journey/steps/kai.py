"""KAI Scheduler v0.13.0 queue accounting for pods with `schedulerName: kai-scheduler`
(NVIDIA/KAI-Scheduler pkg/scheduler/plugins/proportion and pkg/scheduler/api/queue_info; CRD
scheduling.run.ai_queues.yaml: gpu in GPUs, cpu in millicores, memory in MB (10^6 bytes)).

Facts modelled: the queue is the pod's `kai.scheduler/queue` label and must exist; a job may not take a
queue -- or any ancestor -- over its `limit` for gpu, cpu or memory; `-1` is no limit and a resource
left out of `spec.resources` counts as a limit of 0 (issue 15's reading of KAI v0.13.0: every pod of a
child of such a parent is OverLimit); GPUs are whole `nvidia.com/gpu` plus MIG instances counted by their
compute slices (`3g.40gb` = 3, kai-scheduler/KAI-Scheduler#987). A pod group (see kueue.py) is one job.
"""

from __future__ import annotations

import re
from typing import Any

from . import StepResult, requests_of

QUEUE_LABEL = "kai.scheduler/queue"
SCHEDULER = "kai-scheduler"
MIG = re.compile(r"^nvidia\.com/mig-(?P<slices>[1-7])g\.")


def kai_request(pod: dict[str, Any], size: int) -> dict[str, float]:
    req = requests_of(pod)
    gpus = req.get("nvidia.com/gpu", 0)
    for name, value in req.items():
        if m := MIG.match(name):
            gpus += int(m["slices"]) * value
    return {"gpu": gpus * size, "cpu": req.get("cpu", 0) * 1000 * size,
            "memory": req.get("memory", 0) / 1e6 * size}


def admit(host_pod: dict[str, Any], fleet: Any) -> StepResult:
    if host_pod["spec"].get("schedulerName") != SCHEDULER:
        return StepResult(True, "not scheduled by KAI", host_pod, {"kai": False})
    from .kueue import _group_size

    name = host_pod["metadata"].get("labels", {}).get(QUEUE_LABEL)
    if not name:
        return StepResult(False, "KAI: pod has no queue label", host_pod)
    request = kai_request(host_pod, _group_size(host_pod))
    chain, queue = [], fleet.one("Queue", name)
    if queue is None:
        return StepResult(False, f"KAI: queue {name} not found", host_pod)
    while queue is not None:
        chain.append(queue["metadata"]["name"])
        for resource, amount in request.items():
            limit = queue["spec"].get("resources", {}).get(resource, {}).get("limit", 0)
            if limit != -1 and amount > limit:
                return StepResult(False, f"OverLimit: queue {queue['metadata']['name']} {resource} limit "
                                  f"{limit}, the job requests {amount:g}", host_pod, {"queues": chain})
        parent = queue["spec"].get("parentQueue")
        queue = fleet.one("Queue", parent) if parent else None
        if parent and queue is None:
            return StepResult(False, f"KAI: parent queue {parent} not found", host_pod)
    return StepResult(True, f"KAI queue {name}: within limits", host_pod, {"kai": True, "queues": chain})
