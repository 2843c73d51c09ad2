"""Which REST resource serves a kind, learnt from the API server's discovery documents.

We ask the server (GET /api/v1, /apis/<group>/<version>) instead of keeping a table of plurals:
the answer is then right for whatever CRD versions the cluster runs, and a group the cluster does
not serve is known as such (nothing of that kind can exist, so there is nothing to prune).
"""

from __future__ import annotations

from dataclasses import dataclass

# Every apiVersion/kind gpufleet renders (the "prune allowlist", like `kubectl apply --prune`).
# Pruning lists only these kinds, plus any kind found in the desired manifests; objects of other
# kinds are never touched, even if someone copied our labels onto them.
PRUNE_KINDS: tuple[tuple[str, str], ...] = (
    ("v1", "Namespace"),
    ("v1", "ResourceQuota"),
    ("v1", "LimitRange"),
    ("v1", "ServiceAccount"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    ("scheduling.k8s.io/v1", "PriorityClass"),
    ("networking.k8s.io/v1", "NetworkPolicy"),
    ("kueue.x-k8s.io/v1beta2", "ResourceFlavor"),
    ("kueue.x-k8s.io/v1beta2", "Cohort"),
    ("kueue.x-k8s.io/v1beta2", "Topology"),
    ("kueue.x-k8s.io/v1beta2", "WorkloadPriorityClass"),
    ("kueue.x-k8s.io/v1beta2", "ClusterQueue"),
    ("kueue.x-k8s.io/v1beta2", "LocalQueue"),
    ("scheduling.run.ai/v2", "Queue"),
    ("kai.scheduler/v1alpha1", "Topology"),
    ("cilium.io/v2", "CiliumNetworkPolicy"),
    ("cilium.io/v2", "CiliumClusterwideNetworkPolicy"),
    ("kyverno.io/v1", "ClusterPolicy"),
    ("kyverno.io/v1", "Policy"),
    ("karpenter.sh/v1", "NodePool"),
    ("karpenter.sh/v1alpha1", "NodeOverlay"),
    ("source.toolkit.fluxcd.io/v1", "HelmRepository"),
    ("source.toolkit.fluxcd.io/v1", "OCIRepository"),
    ("helm.toolkit.fluxcd.io/v2", "HelmRelease"),
    ("keda.sh/v1alpha1", "ScaledObject"),
    # Inference endpoints (scheduling.endpoints): serving Deployment, its Service and scrape object.
    ("apps/v1", "Deployment"),
    ("v1", "Service"),
    ("operator.victoriametrics.com/v1beta1", "VMServiceScrape"),
)


@dataclass(frozen=True)
class Resource:
    api_version: str
    kind: str
    plural: str
    namespaced: bool

    def collection_path(self, namespace: str = "") -> str:
        base = f"/api/{self.api_version}" if "/" not in self.api_version else f"/apis/{self.api_version}"
        if self.namespaced and namespace:
            return f"{base}/namespaces/{namespace}/{self.plural}"
        return f"{base}/{self.plural}"

    def object_path(self, name: str, namespace: str = "") -> str:
        return f"{self.collection_path(namespace)}/{name}"


def discovery_path(api_version: str) -> str:
    return f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"


def parse_resource_list(api_version: str, document: dict) -> dict[str, Resource]:
    """kind -> Resource from an APIResourceList; subresources (pods/log) are not kinds of their own."""
    found: dict[str, Resource] = {}
    for entry in document.get("resources") or []:
        name = str(entry.get("name", ""))
        kind = str(entry.get("kind", ""))
        if not name or not kind or "/" in name:
            continue
        found.setdefault(kind, Resource(api_version, kind, name, bool(entry.get("namespaced"))))
    return found
