"""What the operator applies so Argo CD or Flux syncs each host cluster's tree (pure; validated against the
upstream CRDs by tests/clusters/test_sync_objects.py).

Argo CD: one ApplicationSet per cluster, generating two Applications -- `<tree>/platform` in sync wave 0, then
`<tree>/tenants` in wave 1 -- with the cluster as destination (its `kube_api`; the cluster gpufleet runs in:
the in-cluster address). Argo CD holds the remote clusters' credentials in its own cluster Secrets
(`argocd cluster add`); nothing here carries them.

Flux: one GitRepository, and per cluster two Kustomizations (platform, then tenants, `dependsOn`) whose
`kubeConfig.secretRef` names the cluster's kubeconfig Secret (`kubeconfig_secret`) -- a reference, never the
kubeconfig itself. The cluster Flux runs in needs none.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

IN_CLUSTER = "https://kubernetes.default.svc"
REPOSITORY = "gpufleet-desired-state"
# The NAME of the Secret holding Flux's read-only deploy key (the key itself is the operator's).
READ_KEY_SECRET = "gpufleet-desired-state-read"


@dataclass(frozen=True)
class SyncTarget:
    name: str
    tree: str
    kube_api: str = ""
    kubeconfig_secret: str = ""

    @classmethod
    def of(cls, cluster: Any) -> SyncTarget:
        return cls(cluster.name, cluster.tree, cluster.kube_api, cluster.kubeconfig_secret)

    @property
    def remote(self) -> bool:
        return bool(self.kube_api or self.kubeconfig_secret)


def _labels(target: SyncTarget) -> dict[str, str]:
    return {"app.kubernetes.io/managed-by": "gpufleet", "gpufleet.io/cluster": target.name}


def argocd(targets: Iterable[SyncTarget], repo_url: str, *, revision: str = "main",
           namespace: str = "argocd", project: str = "default") -> list[dict[str, Any]]:
    out = []
    for target in targets:
        server = target.kube_api or IN_CLUSTER
        out.append({
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "ApplicationSet",
            "metadata": {"name": f"gpufleet-{target.name}", "namespace": namespace, "labels": _labels(target)},
            "spec": {
                "goTemplate": True,
                "goTemplateOptions": ["missingkey=error"],
                "generators": [{"list": {"elements": [
                    {"folder": "platform", "wave": "0"},
                    {"folder": "tenants", "wave": "1"},
                ]}}],
                "template": {
                    "metadata": {
                        "name": f"gpufleet-{target.name}-{{{{.folder}}}}",
                        "labels": _labels(target),
                        "annotations": {"argocd.argoproj.io/sync-wave": "{{.wave}}"},
                    },
                    "spec": {
                        "project": project,
                        "source": {"repoURL": repo_url, "targetRevision": revision,
                                   "path": f"{target.tree}/{{{{.folder}}}}", "directory": {"recurse": True}},
                        "destination": {"server": server},
                        "syncPolicy": {"automated": {"prune": True, "selfHeal": True},
                                       "syncOptions": ["ServerSideApply=true"]},
                    },
                },
            },
        })
    return out


def flux(targets: Iterable[SyncTarget], repo_url: str, *, revision: str = "main", namespace: str = "flux-system",
         read_secret: str = READ_KEY_SECRET) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{
        "apiVersion": "source.toolkit.fluxcd.io/v1",
        "kind": "GitRepository",
        "metadata": {"name": REPOSITORY, "namespace": namespace},
        "spec": {"interval": "1m", "url": repo_url, "ref": {"branch": revision}, "secretRef": {"name": read_secret}},
    }]
    for target in targets:
        for folder, depends in (("platform", None), ("tenants", f"gpufleet-{target.name}-platform")):
            spec: dict[str, Any] = {
                "interval": "5m", "retryInterval": "1m", "timeout": "5m",
                "sourceRef": {"kind": "GitRepository", "name": REPOSITORY},
                "path": f"./{target.tree}/{folder}", "prune": True, "wait": folder == "platform",
            }
            if depends:
                spec["dependsOn"] = [{"name": depends}]
            if target.kubeconfig_secret and not target.kubeconfig_secret.startswith("/"):
                spec["kubeConfig"] = {"secretRef": {"name": target.kubeconfig_secret, "key": "kubeconfig"}}
            out.append({
                "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
                "kind": "Kustomization",
                "metadata": {"name": f"gpufleet-{target.name}-{folder}", "namespace": namespace,
                             "labels": _labels(target)},
                "spec": spec,
            })
    return out
