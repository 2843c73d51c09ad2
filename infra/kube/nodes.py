"""Direct Kubernetes calls for node remediation and for reading scheduling state. Adapter only.

Remediation writes exactly three things, whatever the backend (in GitOps mode too: a cordon cannot wait
for a sync): a Node's `spec.unschedulable` (cordon / uncordon, merge patch), an Eviction of a pod
(POST pods/<name>/eviction: the API server refuses it with 429 while a PodDisruptionBudget forbids it;
pods are never deleted directly), and the deletion of a Karpenter NodeClaim (Karpenter then drains
what is left and replaces the node). Everything else is read: nodes, pods, NodeClaims, Kueue
Workloads and ClusterQueues, KAI PodGroups, Jobs. `REMEDIATION_RULES` in `resources.py` is the RBAC.

Uses the backend's HTTP layer (same package) so errors are classified the same way: 409/429/5xx and
timeouts are `TransientError`, other refusals `PermanentError` with the API server's own message.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .backend import KubernetesBackend, raise_for_status

MERGE_PATCH = "application/merge-patch+json"
NODECLAIMS = "/apis/karpenter.sh/v1/nodeclaims"
KARPENTER_POOL_LABEL = "karpenter.sh/nodepool"
REMEDIATION_ANNOTATION = "gpufleet.io/remediation"


@dataclass(frozen=True)
class Eviction:
    namespace: str
    pod: str
    status: int  # 201 evicted, 404 already gone, 429 refused (PDB)
    message: str

    @property
    def evicted(self) -> bool:
        return self.status in (200, 201, 404)

    @property
    def refused(self) -> bool:
        return self.status == 429


def _labels_match(item: dict[str, Any], selector: dict[str, str]) -> bool:
    labels = (item.get("metadata") or {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in selector.items())


class ClusterOps:
    def __init__(self, backend: KubernetesBackend) -> None:
        self.backend = backend

    def _list(self, path: str, *, labels: dict[str, str] | None = None,
              fields: dict[str, str] | None = None) -> list[dict[str, Any]]:
        query: list[tuple[str, str]] = []
        if labels:
            query.append(("labelSelector", ",".join(f"{k}={v}" for k, v in sorted(labels.items()))))
        if fields:
            query.append(("fieldSelector", ",".join(f"{k}={v}" for k, v in sorted(fields.items()))))
        status, data, retry_after = self.backend._request("GET", path, query=query)
        if status == 404:
            return []  # the group is not served (no Karpenter / no KAI): nothing of it exists
        raise_for_status(status, data, f"GET {path}", retry_after)
        items = [i for i in (data.get("items") or []) if isinstance(i, dict)]
        # Filter ourselves too: never act on the strength of a server-side selector alone.
        return [i for i in items if _labels_match(i, labels or {})]

    # --- nodes ------------------------------------------------------------------------------------

    def nodes(self) -> list[dict[str, Any]]:
        return self._list("/api/v1/nodes")

    def node(self, name: str) -> dict[str, Any] | None:
        return self.backend.read(f"/api/v1/nodes/{name}")

    def set_unschedulable(self, name: str, unschedulable: bool, *, remediation: str = "") -> dict[str, Any]:
        body: dict[str, Any] = {"spec": {"unschedulable": unschedulable},
                                "metadata": {"annotations": {REMEDIATION_ANNOTATION: remediation or None}}}
        data = self.backend._call("PATCH", f"/api/v1/nodes/{name}", body=body, content_type=MERGE_PATCH)
        return data if isinstance(data, dict) else {}

    def pods_on(self, node: str) -> list[dict[str, Any]]:
        pods = self._list("/api/v1/pods", fields={"spec.nodeName": node})
        return [p for p in pods if (p.get("spec") or {}).get("nodeName") == node]

    def evict(self, namespace: str, pod: str) -> Eviction:
        path = f"/api/v1/namespaces/{namespace}/pods/{pod}/eviction"
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": namespace}}
        status, data, retry_after = self.backend._request("POST", path, body=body)
        message = str((data or {}).get("message") or "") if isinstance(data, dict) else ""
        if status in (200, 201, 404, 429):
            return Eviction(namespace, pod, status, message)
        raise_for_status(status, data, f"POST {path}", retry_after)
        return Eviction(namespace, pod, status, message)

    def nodeclaims(self) -> list[dict[str, Any]]:
        return self._list(NODECLAIMS)

    def delete_nodeclaim(self, name: str) -> bool:
        """True when deleted now, False when it was already gone."""
        status, data, retry_after = self.backend._request("DELETE", f"{NODECLAIMS}/{name}")
        if status == 404:
            return False
        raise_for_status(status, data, f"DELETE {NODECLAIMS}/{name}", retry_after)
        return True

    # --- scheduling state (read-only) ---------------------------------------------------------------

    def namespaced(self, api_version: str, plural: str, namespace: str) -> list[dict[str, Any]]:
        base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        return self._list(f"{base}/namespaces/{namespace}/{plural}")

    def cluster_scoped(self, api_version: str, plural: str, name: str) -> dict[str, Any] | None:
        base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        return self.backend.read(f"{base}/{plural}/{name}")

    def cluster_list(self, api_version: str, plural: str) -> list[dict[str, Any]]:
        base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        return self._list(f"{base}/{plural}")
