"""A model of a fresh cluster and of how Flux and Argo CD apply a tree to it (issue 26, B2). Tests only.

The API server serves a custom kind only once its CRD is installed; a custom resource of a kind it does not
serve is refused ("no matches for kind"), in a dry-run as in an apply. What comes with the cluster: the core
API, Flux's and Argo CD's own CRDs (they are bootstrapped first), and the prerequisites gpufleet does not
install (Cilium, Karpenter, the VictoriaMetrics operator, External Secrets). Everything else arrives with a
HelmRelease: helm-controller installs the chart -- CRDs included (`install.crds: CreateReplace`) -- one tick
after the release was applied. What a chart brings is NOT taken from the platform's own list
(scheduling.prerequisites.COMPONENTS, which the kube backend reads): it is every CRD of the chart's API groups
in the upstream reference index (CHART_GROUPS), so a CRD the platform forgot to list is caught.

How each tool applies, following upstream:
- Flux kustomize-controller: a Kustomization runs only when every `dependsOn` is Ready
  (fluxcd/kustomize-controller@186fb3b:internal/controller/kustomization_controller.go:246 and :558-600
  checkDependencies); it applies with ApplyAllStaged (:960; with `wait`, checkHealth :997) -- CRDs and Namespaces
  first, then ApplyAll of the rest, which dry-runs EVERY object and returns on the first error, applying
  nothing of that batch (fluxcd/pkg@e2cfd1a:ssa/manager_apply.go:206-284 ApplyAll, :347-420 ApplyAllStaged).
  With `wait` it is Ready only when what it applied is ready (a HelmRelease: installed). The GitRepository's
  `ignore` (.sourceignore = .gitignore format: last matching pattern wins, `!` re-includes, a pattern without
  a slash matches a base name at any depth, `**/` any leading folders) decides which files the path holds.
- Argo CD (gitops-engine): every task is dry-run first; a kind the server does not serve fails the sync
  before anything is applied unless SkipDryRunOnMissingResource is set
  (argoproj/gitops-engine@5baed56:pkg/sync/sync_context.go:881-902); then tasks are applied and one that the
  server refuses fails the sync. A failed automated sync is retried only with `syncPolicy.retry`; without it
  the same revision is not synced again.
"""

from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass, field
from typing import Any

from infra.gitops.backend import file_name
from infra.manifests import ref
from tests.support.services import REFERENCE_DIR

PREINSTALLED_GROUPS = {"kustomize.toolkit.fluxcd.io", "helm.toolkit.fluxcd.io", "source.toolkit.fluxcd.io",
                       "argoproj.io", "cilium.io", "karpenter.sh", "karpenter.k8s.aws",
                       "operator.victoriametrics.com", "monitoring.coreos.com", "external-secrets.io"}
CORE_GROUPS = {"", "apps", "batch", "policy", "autoscaling"}
# The API groups whose CRDs each chart ships in its crds/ (or templates): Kueue charts/kueue (v0.19.2), KAI
# deployments/kai-scheduler/crds/ (v0.13.0: scheduling.run.ai queues/podgroups and kai.scheduler topologies,
# ../shared/reference/README.md), KEDA charts/keda (v2.20), Kyverno charts/kyverno/charts/crds (3.9.x).
CHART_GROUPS = {"kueue": {"kueue.x-k8s.io"}, "kai-scheduler": {"scheduling.run.ai", "kai.scheduler"},
                "keda": {"keda.sh"}, "kyverno": {"kyverno.io", "policies.kyverno.io"}, "hami": set()}


def crd_kinds() -> dict[str, tuple[str, str]]:
    """CRD name -> (group, kind), from the upstream reference index."""
    index = json.loads((REFERENCE_DIR / "crds" / "index.json").read_text())
    return {c["crd"]: (c["group"], c["kind"]) for c in index}


def gitignored(path: str, patterns: str) -> bool:
    """.gitignore semantics for the pattern shapes the sync objects use (see the module docstring)."""
    ignored = False
    for line in patterns.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = line[1:] if negate else line
        if pattern.startswith("**/"):
            tail = pattern[3:]
            parts = path.split("/")
            hit = any(fnmatch.fnmatchcase("/".join(parts[i:]), tail) for i in range(len(parts)))
        elif "/" not in pattern:
            hit = fnmatch.fnmatchcase(path.rsplit("/", 1)[-1], pattern)
        else:
            hit = fnmatch.fnmatchcase(path, pattern.lstrip("/"))
        if hit:
            ignored = not negate
    return ignored


def repository(trees: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """folder -> manifests, laid out as the GitOps backend writes them: path -> manifest."""
    return {f"{folder}/{file_name(ref(m))}": m for folder, manifests in trees.items() for m in manifests}


@dataclass
class Cluster:
    served: set[tuple[str, str]] = field(default_factory=set)  # (group, kind) of installed CRDs
    objects: dict[str, dict[str, Any]] = field(default_factory=dict)
    installed_releases: set[str] = field(default_factory=set)
    log: list[str] = field(default_factory=list)

    def serves(self, manifest: dict[str, Any]) -> bool:
        obj = ref(manifest)
        built_in = obj.group in CORE_GROUPS or (obj.group.endswith(".k8s.io") and not obj.group.endswith(".x-k8s.io"))
        return built_in or obj.group in PREINSTALLED_GROUPS or (obj.group, obj.kind) in self.served

    def refusal(self, manifest: dict[str, Any]) -> str | None:
        if self.serves(manifest):
            return None
        obj = ref(manifest)
        return f'no matches for kind "{obj.kind}" in version "{obj.api_version}"'

    def apply(self, manifest: dict[str, Any]) -> None:
        self.objects[ref(manifest).key] = manifest

    def helm_controller(self) -> None:
        """Install every applied HelmRelease's chart, CRDs included."""
        kinds = crd_kinds()
        for key, m in list(self.objects.items()):
            if m["kind"] != "HelmRelease" or key in self.installed_releases:
                continue
            self.installed_releases.add(key)
            groups = CHART_GROUPS.get(m["spec"].get("releaseName", ""), set())
            for crd, (group, kind) in sorted(kinds.items()):
                if group in groups:
                    self.served.add((group, kind))
                    self.log.append(f"helm-controller: {m['metadata']['name']} installed CRD {crd}")

    def has_all(self, manifests: list[dict[str, Any]]) -> bool:
        return all(ref(m).key in self.objects for m in manifests)


def flux_tick(cluster: Cluster, sync: list[dict[str, Any]], repo: dict[str, dict[str, Any]],
              ready: set[str]) -> None:
    """One reconcile of every Flux Kustomization, in order; `ready` collects the Ready ones."""
    sources = {o["metadata"]["name"]: o["spec"] for o in sync if o["kind"] == "GitRepository"}
    for ks in (o for o in sync if o["kind"] == "Kustomization"):
        spec, name = ks["spec"], ks["metadata"]["name"]
        if any(dep["name"] not in ready for dep in spec.get("dependsOn", [])):
            cluster.log.append(f"flux: {name} dependency not ready")
            continue
        ignore = sources[spec["sourceRef"]["name"]].get("ignore", "")
        folder = spec["path"].removeprefix("./").rstrip("/") + "/"
        objects = [m for path, m in sorted(repo.items()) if path.startswith(folder) and not gitignored(path, ignore)]
        first = [m for m in objects if m["kind"] in ("CustomResourceDefinition", "Namespace")]
        rest = [m for m in objects if m not in first]
        for m in first:
            cluster.apply(m)
        errors = [e for e in map(cluster.refusal, rest) if e]
        if errors:  # ApplyAll: the dry-run of one object failed, nothing of the batch is applied
            cluster.log.append(f"flux: {name} dry-run failed: {errors[0]}")
            continue
        for m in rest:
            cluster.apply(m)
        releases = [ref(m).key for m in objects if m["kind"] == "HelmRelease"]
        if not spec.get("wait") or all(r in cluster.installed_releases for r in releases):
            ready.add(name)


def argo_tick(cluster: Cluster, sync: list[dict[str, Any]], repo: dict[str, dict[str, Any]],
              failed: set[str]) -> None:
    """One sync of every Application the ApplicationSets generate; `failed` holds the ones that will not be
    synced again (a failed sync without retry)."""
    for app_set in sync:
        template = app_set["spec"]["template"]
        for element in app_set["spec"]["generators"][0]["list"]["elements"]:
            name = template["metadata"]["name"].replace("{{.stage}}", element.get("stage", "")).replace(
                "{{.folder}}", element.get("folder", ""))
            if name in failed:
                continue
            spec = template["spec"]
            source = spec["source"]
            path = source["path"].replace("{{.path}}", element.get("path", "")).replace(
                "{{.folder}}", element.get("folder", ""))
            directory = source.get("directory", {})
            include = directory.get("include", "").replace("{{.include}}", element.get("include", ""))
            exclude = directory.get("exclude", "").replace("{{.exclude}}", element.get("exclude", ""))
            objects = [m for p, m in sorted(repo.items()) if p.startswith(path.rstrip("/") + "/")
                       and _argo_glob(p[len(path) + 1:], include, True)
                       and not _argo_glob(p[len(path) + 1:], exclude, False)]
            options = spec["syncPolicy"].get("syncOptions", [])
            skip = "SkipDryRunOnMissingResource=true" in options
            errors = [e for e in map(cluster.refusal, objects) if e]
            ok = True
            if errors and not skip:
                cluster.log.append(f"argo: {name} dry-run failed: {errors[0]}")
                ok = False
            else:
                for m in objects:
                    if cluster.serves(m):
                        cluster.apply(m)
                    else:
                        ok = False
                        cluster.log.append(f"argo: {name} apply failed: {cluster.refusal(m)}")
            if not ok and "retry" not in spec["syncPolicy"]:
                failed.add(name)


def _argo_glob(path: str, pattern: str, empty: bool) -> bool:
    """Argo CD's directory include/exclude: a glob, `{a,b}` alternatives; empty means include all/exclude none."""
    if not pattern:
        return empty
    alternatives = pattern[1:-1].split(",") if pattern.startswith("{") and pattern.endswith("}") else [pattern]
    return any(fnmatch.fnmatchcase(path, alt) for alt in alternatives)
