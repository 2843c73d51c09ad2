"""Choose the backend named by GPUFLEET_BACKEND."""

from __future__ import annotations

from django.conf import settings

from gpufleet.core import registry
from infra.backend import Backend


def get_backend() -> Backend:
    name = settings.GPUFLEET_BACKEND
    if name == "gitops":
        from infra.gitops import GitOpsBackend

        return GitOpsBackend(
            settings.GPUFLEET_GITOPS_REPO,
            settings.GPUFLEET_GITOPS_AUTHOR,
            remote=settings.GPUFLEET_GITOPS_REMOTE,
            remote_branch=settings.GPUFLEET_GITOPS_REMOTE_BRANCH,
            push_enabled=settings.GPUFLEET_GITOPS_PUSH,
            push_status_dir=settings.GPUFLEET_GITOPS_PUSH_STATUS_DIR,
        )
    # The scheduling app (which owns host clusters) contributes `kube_clusters`: the Kubernetes backend then
    # holds one client per cluster.
    kube_clusters = registry.one("kube_clusters") if name == "kubernetes" else None
    if kube_clusters is not None:
        from infra.kube.clusters import from_references

        clusters, local_tree = kube_clusters()
        return from_references(clusters, settings, local_tree=local_tree)
    if name == "kubernetes":
        from infra.kube.backend import KubernetesBackend  # type: ignore[import-not-found]

        return KubernetesBackend.from_settings(settings)  # type: ignore[no-any-return]
    raise ValueError(f"GPUFLEET_BACKEND must be 'gitops' or 'kubernetes' (got {name!r})")


def get_schema_registry():  # type: ignore[no-untyped-def]

    return _registry(settings.GPUFLEET_REFERENCE_DIR, settings.GPUFLEET_KUBERNETES_VERSION)


_REGISTRIES: dict[tuple[str, str], object] = {}


def _registry(reference_dir: str, version: str):  # type: ignore[no-untyped-def]
    from infra.schemas import SchemaRegistry

    key = (reference_dir, version)
    if key not in _REGISTRIES:
        _REGISTRIES[key] = SchemaRegistry(reference_dir, version)
    return _REGISTRIES[key]
