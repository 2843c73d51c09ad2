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
- Argo CD's ApplicationSet controller with RollingSync (issue 26 review F8; argoproj/argo-cd@v3.5.1:
  applicationset/progressivesync/progressive_sync.go, cited per function below): only with progressive syncs
  enabled on the controller (else the strategy is ignored and the Applications keep their automated sync,
  applicationset/controllers/applicationset_controller.go:248-312). Steps select Applications by label; a step's
  Applications are synced (an operation the controller sets, automated sync off) only once every Application of
  the earlier steps is Healthy; a failed operation is retried by the Application controller within the
  operation's retry limit (controller/appcontroller.go:1620) and never started again by the ApplicationSet
  controller. An Application is Synced when all its objects are on the cluster, Healthy when, in addition, its
  HelmReleases are installed (resource_customizations/helm.toolkit.fluxcd.io/HelmRelease/health.lua: Ready and
  Released).
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
    absent: set[str] = field(default_factory=set)  # prerequisite groups (PREINSTALLED_GROUPS) not installed yet
    objects: dict[str, dict[str, Any]] = field(default_factory=dict)
    installed_releases: set[str] = field(default_factory=set)
    log: list[str] = field(default_factory=list)

    def serves(self, manifest: dict[str, Any]) -> bool:
        obj = ref(manifest)
        built_in = obj.group in CORE_GROUPS or (obj.group.endswith(".k8s.io") and not obj.group.endswith(".x-k8s.io"))
        prerequisite = obj.group in PREINSTALLED_GROUPS and obj.group not in self.absent
        return built_in or prerequisite or (obj.group, obj.kind) in self.served

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


@dataclass(frozen=True)
class ArgoApp:
    """One Application an ApplicationSet's list generator and template produce (the substitutions the sync
    objects use)."""
    name: str
    labels: dict[str, str]
    spec: dict[str, Any]
    path: str
    include: str
    exclude: str


def generated_apps(app_set: dict[str, Any]) -> list[ArgoApp]:
    template = app_set["spec"]["template"]

    def fill(text: str, element: dict[str, str]) -> str:
        for key, value in element.items():
            text = text.replace("{{." + key + "}}", value)
        return text

    out = []
    for element in app_set["spec"]["generators"][0]["list"]["elements"]:
        source = template["spec"]["source"]
        directory = source.get("directory", {})
        out.append(ArgoApp(
            fill(template["metadata"]["name"], element),
            {k: fill(v, element) for k, v in template["metadata"].get("labels", {}).items()},
            template["spec"], fill(source["path"], element), fill(directory.get("include", ""), element),
            fill(directory.get("exclude", ""), element)))
    return out


def app_objects(app: ArgoApp, repo: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    prefix = app.path.rstrip("/") + "/"
    return [m for p, m in sorted(repo.items()) if p.startswith(prefix)
            and _argo_glob(p[len(prefix):], app.include, True) and not _argo_glob(p[len(prefix):], app.exclude, False)]


def argo_sync(cluster: Cluster, app: ArgoApp, repo: dict[str, dict[str, Any]]) -> bool:
    """One sync attempt (gitops-engine: dry-run every task, then apply); True when it succeeded."""
    objects = app_objects(app, repo)
    skip = "SkipDryRunOnMissingResource=true" in app.spec["syncPolicy"].get("syncOptions", [])
    errors = [e for e in map(cluster.refusal, objects) if e]
    if errors and not skip:
        cluster.log.append(f"argo: {app.name} dry-run failed: {errors[0]}")
        return False
    ok = True
    for m in objects:
        if cluster.serves(m):
            cluster.apply(m)
        else:
            ok = False
            cluster.log.append(f"argo: {app.name} apply failed: {cluster.refusal(m)}")
    return ok


def argo_tick(cluster: Cluster, sync: list[dict[str, Any]], repo: dict[str, dict[str, Any]],
              failed: set[str]) -> None:
    """One automated sync of every Application the ApplicationSets generate (AllAtOnce); `failed` holds the
    ones that will not be synced again (a failed sync without retry)."""
    for app_set in sync:
        for app in generated_apps(app_set):
            if app.name in failed:
                continue
            if not argo_sync(cluster, app, repo) and "retry" not in app.spec["syncPolicy"]:
                failed.add(app.name)


# --- RollingSync: argoproj/argo-cd@v3.5.1:applicationset/progressivesync/progressive_sync.go --------------------

WAITING, PENDING, PROGRESSING, HEALTHY = "Waiting", "Pending", "Progressing", "Healthy"


def label_matched(value: str, expression: dict[str, Any]) -> bool:
    """labelMatchedExpression (:330-346): In matches a listed value, NotIn any other; other operators never."""
    operator = expression.get("operator")
    if operator not in ("In", "NotIn"):
        return False
    if value in expression.get("values", []):
        return operator == "In"
    return operator == "NotIn"


def rolling_steps(app_set: dict[str, Any], apps: list[tuple[str, dict[str, str]]]) -> list[list[str]]:
    """buildAppDependencyList (:280-328): the Application names of each step. A missing label fails an `In`
    expression and passes a `NotIn` one; an Application no step selects is never synced by the controller."""
    strategy = app_set["spec"].get("strategy") or {}
    if strategy.get("type", "AllAtOnce") in ("", "AllAtOnce"):
        return []
    steps = (strategy.get("rollingSync") or {}).get("steps") or []
    out: list[list[str]] = [[] for _ in steps]
    for name, labels in apps:
        for i, step in enumerate(steps):
            selected = True
            for expression in step.get("matchExpressions") or []:
                if expression["key"] in labels:
                    if not label_matched(labels[expression["key"]], expression):
                        selected = False
                        break
                elif expression.get("operator") == "In":
                    selected = False
                    break
            if selected:
                out[i].append(name)
    return out


def apps_to_sync(steps: list[list[str]], statuses: dict[str, str], current: set[str]) -> dict[str, bool]:
    """getAppsToSync (:524-569): every Application of a step may sync, and the next step only once each
    Application of this one exists and is Healthy (an empty step is complete)."""
    out: dict[str, bool] = {}
    for step in steps:
        for name in step:
            out[name] = True
        if any(name not in current or statuses.get(name) != HEALTHY for name in step):
            break
    return out


def next_status(status: str | None, *, revision_changed: bool, synced: bool, healthy: bool,
                operation_since_pending: bool) -> str:
    """UpdateApplicationSetApplicationStatus (:377-503), for one Application: a new one or one whose revision
    changed waits; a waiting one already in sync is Healthy (or Progressing); a pending one whose operation
    started since is Progressing, whatever the operation's result; a progressing one becomes Healthy when it
    is Synced and Healthy."""
    new = WAITING if status is None or revision_changed else status
    if new == WAITING:
        if synced:
            return HEALTHY if healthy else PROGRESSING
        return WAITING
    if status == PENDING and operation_since_pending:
        return PROGRESSING
    if status == PROGRESSING and healthy and synced:
        return HEALTHY
    return new


def sync_operation(spec: dict[str, Any], prune: bool) -> dict[str, Any]:
    """syncApplication (:775-806): the operation the controller sets on an Application of the current step --
    the Application's own retry and sync options, or a retry limit of 5."""
    operation: dict[str, Any] = {"initiatedBy": {"username": "applicationset-controller", "automated": True},
                                 "sync": {}, "retry": {"limit": 5}}
    policy = spec.get("syncPolicy")
    if policy is not None:
        if policy.get("retry") is not None:
            operation["retry"] = policy["retry"]
        if policy.get("syncOptions") is not None:
            operation["sync"]["syncOptions"] = policy["syncOptions"]
        operation["sync"]["prune"] = prune
    return operation


@dataclass
class RollingState:
    statuses: dict[str, str] = field(default_factory=dict)  # the ApplicationSet's status.applicationStatus
    operations: dict[str, dict[str, Any]] = field(default_factory=dict)  # running operation per Application
    attempts: dict[str, int] = field(default_factory=dict)  # the running operation's retryCount
    started: set[str] = field(default_factory=set)  # operation started since the Application became Pending
    triggered: list[tuple[str, frozenset[str]]] = field(default_factory=list)  # (app, Healthy apps) per sync set


def app_health(cluster: Cluster, app: ArgoApp, repo: dict[str, dict[str, Any]]) -> tuple[bool, bool]:
    """(Synced, Healthy) of an Application on the model cluster."""
    objects = app_objects(app, repo)
    synced = cluster.has_all(objects)
    releases = [ref(m).key for m in objects if m["kind"] == "HelmRelease"]
    return synced, synced and all(r in cluster.installed_releases for r in releases)


def argo_rolling_tick(cluster: Cluster, sync: list[dict[str, Any]], repo: dict[str, dict[str, Any]],
                      state: RollingState) -> None:
    """One reconcile of the ApplicationSet controller (progressive syncs enabled), then one attempt of every
    running sync operation by the Application controller. The repository is one revision throughout."""
    apps: dict[str, ArgoApp] = {}
    for app_set in sync:
        generated = generated_apps(app_set)
        apps.update((a.name, a) for a in generated)
        for app in generated:
            synced, healthy = app_health(cluster, app, repo)
            state.statuses[app.name] = next_status(
                state.statuses.get(app.name), revision_changed=False, synced=synced, healthy=healthy,
                operation_since_pending=app.name in state.started)
        steps = rolling_steps(app_set, [(a.name, a.labels) for a in generated])
        allowed = apps_to_sync(steps, state.statuses, {a.name for a in generated})
        healthy_now = frozenset(n for n, s in state.statuses.items() if s == HEALTHY)
        for app in generated:  # UpdateApplicationSetApplicationStatusProgress (:599-678), no maxUpdate
            if state.statuses[app.name] == WAITING and allowed.get(app.name):
                state.statuses[app.name] = PENDING
                state.started.discard(app.name)
            if state.statuses[app.name] == PENDING and app.name not in state.operations:
                prune = bool((app.spec["syncPolicy"].get("automated") or {}).get("prune"))
                state.operations[app.name] = sync_operation(app.spec, prune)
                state.attempts[app.name] = 0
                state.triggered.append((app.name, healthy_now))
    for name, operation in list(state.operations.items()):
        state.started.add(name)
        if argo_sync(cluster, apps[name], repo):
            del state.operations[name]
            continue
        limit = operation["retry"].get("limit", 0)
        if limit < 0 or state.attempts[name] < limit:
            state.attempts[name] += 1
        else:
            del state.operations[name]
            cluster.log.append(f"argo: {name} sync failed after {state.attempts[name]} retries")


def _argo_glob(path: str, pattern: str, empty: bool) -> bool:
    """Argo CD's directory include/exclude: a glob, `{a,b}` alternatives; empty means include all/exclude none."""
    if not pattern:
        return empty
    alternatives = pattern[1:-1].split(",") if pattern.startswith("{") and pattern.endswith("}") else [pattern]
    return any(fnmatch.fnmatchcase(path, alt) for alt in alternatives)
