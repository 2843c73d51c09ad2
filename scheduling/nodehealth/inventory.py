"""The GPU nodes as the Kubernetes API shows them, and the node-level readings they carry. Pure parsing.

A node is a GPU node when it has GPU capacity (`nvidia.com/gpu` or `nvidia.com/mig-*`) or carries the
platform's flavor label. Its flavor is the `gpufleet.io/flavor` label the node pools put on their nodes.
Node conditions set by Node Problem Detector or GPU health agents (NVSentinel, AKS' managed NPD) become
`node_condition` readings when their status is "True"; GPUs the device plugin withdrew from allocatable
(capacity - allocatable) become an `unhealthy_gpus` reading.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from gpufleet.core import sharing
from scheduling.nodepools.render import FLAVOR_LABEL, POOL_LABEL

from .classify import Reading
from .models import Signal

KARPENTER_POOL_LABEL = "karpenter.sh/nodepool"
# Conditions every kubelet reports: they describe the node, not its GPUs (a NotReady node is the
# node lifecycle controller's business), so they never match a GPU health rule.
KUBELET_CONDITIONS = frozenset({"Ready", "MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable"})


def _gpu_resource(name: str) -> bool:
    return sharing.counts_gpus(name)


def _count(raw: Any) -> int:
    try:
        return int(Decimal(str(raw)))
    except (InvalidOperation, ValueError):
        return 0


@dataclass(frozen=True)
class GpuNode:
    name: str
    flavor: str
    pool: str
    unschedulable: bool
    gpu_capacity: int
    gpu_allocatable: int
    nodeclaim: str = ""  # the Karpenter NodeClaim behind it ("" if not Karpenter-managed)
    conditions: tuple[dict[str, str], ...] = field(default=())

    @property
    def karpenter(self) -> bool:
        return bool(self.nodeclaim)

    def readings(self) -> list[Reading]:
        out = []
        for cond in self.conditions:
            if cond.get("status") == "True" and cond.get("type") not in KUBELET_CONDITIONS:
                evidence = {"source": "node condition", **{k: cond.get(k, "") for k in
                                                          ("type", "status", "reason", "message",
                                                           "lastTransitionTime")}}
                out.append(Reading(self.name, Signal.NODE_CONDITION.value, cond.get("type", ""), Decimal(1),
                                   evidence=evidence))
        withdrawn = self.gpu_capacity - self.gpu_allocatable
        if withdrawn > 0:
            out.append(Reading(self.name, Signal.UNHEALTHY_GPUS.value, "", Decimal(withdrawn), evidence={
                "source": "node status", "capacity": self.gpu_capacity, "allocatable": self.gpu_allocatable}))
        return out


def parse_nodes(nodes: list[dict[str, Any]], nodeclaims: list[dict[str, Any]]) -> list[GpuNode]:
    claims = {str((c.get("status") or {}).get("nodeName") or ""): str((c.get("metadata") or {}).get("name"))
              for c in nodeclaims}
    out = []
    for node in nodes:
        meta, spec, status = node.get("metadata") or {}, node.get("spec") or {}, node.get("status") or {}
        labels = meta.get("labels") or {}
        capacity = sum(_count(v) for k, v in (status.get("capacity") or {}).items() if _gpu_resource(k))
        allocatable = sum(_count(v) for k, v in (status.get("allocatable") or {}).items() if _gpu_resource(k))
        if not capacity and FLAVOR_LABEL not in labels:
            continue  # not a GPU node
        name = str(meta.get("name"))
        claim = claims.get(name, "")
        out.append(GpuNode(
            name=name, flavor=str(labels.get(FLAVOR_LABEL, "")),
            pool=str(labels.get(POOL_LABEL) or labels.get(KARPENTER_POOL_LABEL) or ""),
            unschedulable=bool(spec.get("unschedulable")), gpu_capacity=capacity, gpu_allocatable=allocatable,
            nodeclaim=claim,
            conditions=tuple({k: str(v) for k, v in c.items()} for c in status.get("conditions") or []
                             if isinstance(c, dict))))
    return sorted(out, key=lambda n: n.name)
