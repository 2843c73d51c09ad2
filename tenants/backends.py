"""Choose the backend named by GPUFLEET_BACKEND."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpufleet.core import conf, registry
from infra.backend import Backend

if TYPE_CHECKING:
    from infra.kube.backend import KubeAccess


def get_backend() -> Backend:
    name = conf.BACKEND
    if name == "gitops":
        from infra.gitops import GitOpsBackend

        return GitOpsBackend(
            conf.GITOPS_REPO,
            conf.GITOPS_AUTHOR,
            remote=conf.GITOPS_REMOTE,
            remote_branch=conf.GITOPS_REMOTE_BRANCH,
            push_enabled=conf.GITOPS_PUSH,
            push_status_dir=conf.GITOPS_PUSH_STATUS_DIR,
        )
    # The scheduling app (which owns host clusters) contributes `kube_clusters`: the Kubernetes backend then
    # holds one client per cluster.
    kube_clusters = registry.one("kube_clusters") if name == "kubernetes" else None
    if kube_clusters is not None:
        from infra.kube.clusters import from_references

        clusters, local_tree = kube_clusters()
        return from_references(clusters, kube_access(), local_tree=local_tree)
    if name == "kubernetes":
        from infra.kube.backend import KubernetesBackend  # type: ignore[import-not-found]

        return KubernetesBackend.from_access(kube_access())  # type: ignore[no-any-return]
    raise ValueError(f"GPUFLEET_BACKEND must be 'gitops' or 'kubernetes' (got {name!r})")



def kube_access(kubeconfig: str = "", context: str = "") -> KubeAccess:
    """How this platform reaches the Kubernetes API (infra reads no setting); a non-empty `kubeconfig` or
    `context` (a command's flag) wins over the setting."""
    from infra.kube.backend import KubeAccess

    return KubeAccess(kubeconfig=kubeconfig or conf.KUBECONFIG, context=context or conf.KUBE_CONTEXT,
                      field_manager=conf.KUBE_FIELD_MANAGER, cluster_kubeconfig_dir=conf.CLUSTER_KUBECONFIG_DIR)


def get_schema_registry():  # type: ignore[no-untyped-def]

    return _registry(conf.REFERENCE_DIR, conf.KUBERNETES_VERSION)


_REGISTRIES: dict[tuple[str, str], object] = {}


def _registry(reference_dir: str, version: str):  # type: ignore[no-untyped-def]
    from infra.schemas import SchemaRegistry

    key = (reference_dir, version)
    if key not in _REGISTRIES:
        _REGISTRIES[key] = SchemaRegistry(reference_dir, version)
    return _REGISTRIES[key]
