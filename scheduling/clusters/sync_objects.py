"""What the operator applies so Argo CD or Flux syncs each host cluster's tree (pure; validated against the
upstream CRDs by tests/clusters/test_sync_objects.py; the bootstrap order is replayed against a model of each
tool in tests/clusters/test_bootstrap_order.py).

Every cluster's tree is delivered in three stages (docs/compatibility.md, "B2 bootstrap order"):
1. controllers -- the Flux sources and HelmReleases of `<tree>/platform` (they install Kueue's, KAI's, KEDA's,
   Kyverno's CRDs);
2. configs -- the rest of `<tree>/platform` (ResourceFlavors, ClusterQueues, policies: custom resources of
   those CRDs);
3. tenants -- `<tree>/tenants`.
A custom resource applied in the same batch as the release that installs its CRD stops the batch: Flux's
server-side apply dry-runs every object of a stage first and any error aborts it
(fluxcd/pkg@e2cfd1a:ssa/manager_apply.go:206-284), Argo CD fails a sync whose dry-run meets an unknown kind
unless SkipDryRunOnMissingResource is set (argoproj/gitops-engine@5baed56:pkg/sync/sync_context.go:881-902).

Flux: per cluster three Kustomizations -- controllers (`wait`), configs (`dependsOn` controllers, `wait`),
tenants (`dependsOn` configs). The platform folder is one flat folder of files named after their kind
(infra.gitops.backend.file_name), so the stages are cut by two extra GitRepositories over the same repository
whose `.sourceignore`-format `ignore` keeps only (controllers) or leaves out (configs) the installer files.

Argo CD: one ApplicationSet per cluster generating the same three Applications, cut by `directory.include`/
`exclude`, each labelled with its stage and ordered by the ApplicationSet's `strategy: RollingSync` (one step per
stage, matched on that label). Sync waves do not order Applications an ApplicationSet generates (its default
strategy is AllAtOnce; issue 26 review F8): RollingSync does, when the ApplicationSet controller runs with
progressive syncs enabled (`applicationsetcontroller.enable.progressive.syncs: "true"` in argocd-cmd-params-cm,
default false: argoproj/argo-cd@v3.5.1:cmd/argocd-applicationset-controller/commands/applicationset_controller.go:311).
Then the controller syncs a step's Applications only once every Application of the previous steps is Healthy
(applicationset/progressivesync/progressive_sync.go:524-569 getAppsToSync) -- a HelmRelease is Healthy when Flux
reports it Ready and Released (resource_customizations/helm.toolkit.fluxcd.io/HelmRelease/health.lua), i.e. its
chart and CRDs are installed. RollingSync turns automated sync off on the generated Applications and triggers
each sync itself with the Application's own `syncPolicy.retry` (progressive_sync.go:745-806; without one, a
limit of 5), and never retries a failed sync (:481): so each Application keeps SkipDryRunOnMissingResource=true
and an unlimited retry with backoff. Without progressive syncs the controller ignores the strategy
(applicationset_controller.go:248-312) and the Applications keep their automated sync: configs and tenants
then fail and retry until the controllers' CRDs exist, as before.

Destinations (docs/compatibility.md, "B7"): a cluster that names neither an API URL nor credentials is the one
Argo CD / Flux runs in, and at most one cluster may be that. Argo CD: `destination.server` = the cluster's
`kube_api`; a cluster registered only by its kubeconfig Secret is addressed by `destination.name` = its name
(the name of its Argo CD cluster Secret, `argocd cluster add --name <cluster>`). Flux: every remote cluster's
Kustomizations carry `kubeConfig.secretRef`; a remote cluster without a Secret name (an API URL only, or a
kubeconfig *file* path, which Flux cannot read) is refused: `SyncTargetError`, never a tree silently sent to
the cluster Flux runs in. Credentials are only ever referenced, never rendered.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from infra.manifests import INSTALLER_KINDS

IN_CLUSTER = "https://kubernetes.default.svc"
REPOSITORY = "gpufleet-desired-state"
# The NAME of the Secret holding Flux's read-only deploy key (the key itself is the operator's).
READ_KEY_SECRET = "gpufleet-desired-state-read"
STAGES = ("controllers", "configs", "tenants")
# The label each generated Application carries and RollingSync's steps select on (issue 26 review F8).
STAGE_LABEL = "gpufleet.io/stage"
# What the ApplicationSet controller needs for RollingSync (argo-cd v3.5.1 docs/operator-manual/applicationset/
# Progressive-Syncs.md "Enabling Progressive Syncs"); checked by `gpufleet doctor` (scheduling.doctor_review).
PROGRESSIVE_SYNCS_CONFIGMAP = "argocd-cmd-params-cm"
PROGRESSIVE_SYNCS_KEY = "applicationsetcontroller.enable.progressive.syncs"
# Argo CD: an unlimited retry (negative limit: "unlimited number of attempts if less than 0", argo-cd
# docs/operator-manual/application.yaml; controller/appcontroller.go:1620 @v3.5.1) with backoff, so the
# configs/tenants Applications converge once the controllers' CRDs exist instead of stopping at the first failed
# sync of a commit. Under RollingSync it is what retries a failed sync at all: the ApplicationSet controller
# copies it into the sync operation it starts and does not start another (argo-cd@v3.5.1:applicationset/
# progressivesync/progressive_sync.go:481, 794-797).
ARGO_RETRY = {"limit": -1, "backoff": {"duration": "30s", "factor": 2, "maxDuration": "5m"}}
ARGO_SYNC_OPTIONS = ["ServerSideApply=true", "SkipDryRunOnMissingResource=true"]


class SyncTargetError(ValueError):
    """The clusters cannot be delivered as registered (a remote cluster without usable credentials, or two
    clusters that would both go to the cluster the tool runs in)."""


def installer_globs() -> list[str]:
    """File-name globs of the installer objects (infra.gitops.backend.file_name: `<kind>.<group>_...yaml`)."""
    return [f"{kind.lower()}.{group}_*.yaml" for group, kind in sorted(INSTALLER_KINDS)]


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

    @property
    def secret_name(self) -> str:
        """The kubeconfig Secret's name ('' for none, or for a file path the kube backend reads)."""
        ref = self.kubeconfig_secret
        return "" if not ref or ref.startswith("/") else ref

    def stage_path(self, stage: str) -> str:
        folder = "tenants" if stage == "tenants" else "platform"
        return f"{self.tree}/{folder}" if self.tree else folder


def delivery_problems(targets: Iterable[SyncTarget], tool: str) -> list[str]:
    """Why these clusters cannot be delivered by `tool` ('argocd' | 'flux'); empty when they can."""
    targets = list(targets)
    problems = []
    local = [t.name for t in targets if not t.remote]
    if len(local) > 1:
        problems.append(f"clusters {', '.join(local)} name neither an API URL nor credentials: each would be "
                        "delivered to the cluster the GitOps tool runs in; give all but one their kube_api and "
                        "kubeconfig_secret")
    for t in targets:
        if not t.remote:
            continue
        if tool == "flux" and not t.secret_name:
            why = (f"its kubeconfig_secret {t.kubeconfig_secret!r} is a file path" if t.kubeconfig_secret
                   else "it has an API URL but no kubeconfig_secret")
            problems.append(f"cluster {t.name}: {why}; Flux needs the NAME of a Secret (key `kubeconfig`) in its "
                            "namespace to reach a remote cluster (Kustomization spec.kubeConfig.secretRef)")
    return problems


def _require_deliverable(targets: list[SyncTarget], tool: str) -> None:
    problems = delivery_problems(targets, tool)
    if problems:
        raise SyncTargetError("; ".join(problems))


def argo_destination(target: SyncTarget) -> dict[str, str]:
    if target.kube_api:
        return {"server": target.kube_api}
    if target.remote:  # registered in Argo CD by its credentials only: addressed by the cluster Secret's name
        return {"name": target.name}
    return {"server": IN_CLUSTER}


def _labels(target: SyncTarget) -> dict[str, str]:
    return {"app.kubernetes.io/managed-by": "gpufleet", "gpufleet.io/cluster": target.name}


def rolling_sync() -> dict[str, Any]:
    """One RollingSync step per stage, in order: every Application is selected by exactly one step (one left
    out would never be synced by the ApplicationSet controller, Progressive-Syncs.md). No maxUpdate: a step's
    Applications (one per stage and cluster here) sync together."""
    return {"type": "RollingSync", "rollingSync": {"steps": [
        {"matchExpressions": [{"key": STAGE_LABEL, "operator": "In", "values": [stage]}]} for stage in STAGES]}}


def argocd(targets: Iterable[SyncTarget], repo_url: str, *, revision: str = "main",
           namespace: str = "argocd", project: str = "default") -> list[dict[str, Any]]:
    targets = list(targets)
    _require_deliverable(targets, "argocd")
    installers = "{" + ",".join(installer_globs()) + "}"
    out = []
    for target in targets:
        elements = [
            {"stage": "controllers", "path": target.stage_path("controllers"), "include": installers, "exclude": ""},
            {"stage": "configs", "path": target.stage_path("configs"), "include": "", "exclude": installers},
            {"stage": "tenants", "path": target.stage_path("tenants"), "include": "", "exclude": ""},
        ]
        out.append({
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "ApplicationSet",
            "metadata": {"name": f"gpufleet-{target.name}", "namespace": namespace, "labels": _labels(target)},
            "spec": {
                "goTemplate": True,
                "goTemplateOptions": ["missingkey=error"],
                "generators": [{"list": {"elements": elements}}],
                "strategy": rolling_sync(),
                "template": {
                    "metadata": {
                        "name": f"gpufleet-{target.name}-{{{{.stage}}}}",
                        "labels": {**_labels(target), STAGE_LABEL: "{{.stage}}"},
                    },
                    "spec": {
                        "project": project,
                        "source": {"repoURL": repo_url, "targetRevision": revision, "path": "{{.path}}",
                                   "directory": {"recurse": True, "include": "{{.include}}",
                                                 "exclude": "{{.exclude}}"}},
                        "destination": argo_destination(target),
                        "syncPolicy": {"automated": {"prune": True, "selfHeal": True},
                                       "syncOptions": list(ARGO_SYNC_OPTIONS),
                                       "retry": {**ARGO_RETRY, "backoff": dict(ARGO_RETRY["backoff"])}},
                    },
                },
            },
        })
    return out


def _git_repository(name: str, repo_url: str, revision: str, namespace: str, read_secret: str,
                    ignore: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"interval": "1m", "url": repo_url, "ref": {"branch": revision},
                            "secretRef": {"name": read_secret}}
    if ignore is not None:
        spec["ignore"] = ignore
    return {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def flux_ignores() -> dict[str, str]:
    """`.sourceignore` (gitignore) text per stage source: controllers keep only the installer files, configs
    leave them out of every platform folder. Tenants read the whole repository."""
    globs = installer_globs()
    keep_installers = "\n".join(["# only the platform's sources and HelmReleases", "*.yaml",
                                  *(f"!{g}" for g in globs)]) + "\n"
    drop_installers = "\n".join(["# the platform without its sources and HelmReleases",
                                  *(f"**/platform/{g}" for g in globs)]) + "\n"
    return {"controllers": keep_installers, "configs": drop_installers}


def flux(targets: Iterable[SyncTarget], repo_url: str, *, revision: str = "main", namespace: str = "flux-system",
         read_secret: str = READ_KEY_SECRET) -> list[dict[str, Any]]:
    targets = list(targets)
    _require_deliverable(targets, "flux")
    ignores = flux_ignores()
    sources = {"tenants": REPOSITORY, "controllers": f"{REPOSITORY}-controllers", "configs": f"{REPOSITORY}-configs"}
    out: list[dict[str, Any]] = [
        _git_repository(REPOSITORY, repo_url, revision, namespace, read_secret),
        _git_repository(sources["controllers"], repo_url, revision, namespace, read_secret, ignores["controllers"]),
        _git_repository(sources["configs"], repo_url, revision, namespace, read_secret, ignores["configs"]),
    ]
    for target in targets:
        previous = ""
        for stage in STAGES:
            spec: dict[str, Any] = {
                "interval": "5m", "retryInterval": "1m", "timeout": "5m",
                "sourceRef": {"kind": "GitRepository", "name": sources[stage]},
                "path": f"./{target.stage_path(stage)}", "prune": True,
                # Ready only when what it applied is ready (HelmReleases installed, CRDs with them): what the
                # next stage's dependsOn waits for.
                "wait": stage != "tenants",
            }
            if previous:
                spec["dependsOn"] = [{"name": previous}]
            if target.secret_name:
                spec["kubeConfig"] = {"secretRef": {"name": target.secret_name, "key": "kubeconfig"}}
            name = f"gpufleet-{target.name}-{stage}"
            out.append({
                "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
                "kind": "Kustomization",
                "metadata": {"name": name, "namespace": namespace, "labels": _labels(target)},
                "spec": spec,
            })
            previous = name
    return out
