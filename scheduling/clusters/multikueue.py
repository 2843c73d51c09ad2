"""MultiKueue mode (optional, GPUFLEET_MULTIKUEUE): a tenant submits jobs on its home cluster and Kueue
dispatches them to the tenant's other placements. Pure: plain inputs in, Kueue v1beta2 dicts out; the
per-cluster render calls these next to scheduling.render's objects.

Shape (Kueue v0.19.2, config/components/crd/bases/ and site/.../multikueue/multikueue-setup.yaml):

- On the manager (the tenant's home cluster), all owned by the tenant (so a placement change re-renders only
  the tenant's files, and two tenants never render the same object):
  - one `MultiKueueCluster` per worker cluster (`tenant-<slug>-<worker>`), whose `clusterSource.kubeConfig`
    names a Secret (`locationType: Secret`) in Kueue's namespace holding the worker's kubeconfig under the key
    `kubeconfig` (`multikueue-<worker>`, shared by every tenant dispatching there). Only the Secret's NAME is
    rendered: the credential is put there by the operator (or their secret tooling) and never passes through
    gpufleet or Git;
  - a `MultiKueueConfig` listing those MultiKueueClusters (preference order, at most 20, unique),
    an `AdmissionCheck` (controller `kueue.x-k8s.io/multikueue`) pointing at it, and a dedicated dispatch
    `ClusterQueue` carrying that check with a `LocalQueue` (`gpu-dispatch`) in the tenant namespace.
    Upstream runs regular jobs on the manager only "when using a dedicated ClusterQueue", so the tenant's
    own `gpu` queue stays exactly as it was (enabling the mode re-renders nothing that exists) and a job
    opts into dispatch by naming `gpu-dispatch`. The dispatch queue's quota is the sum of the tenant's
    nominal quotas on its workers: upstream advises the manager quota equal the workers' total (lower
    leaves workers idle, higher dispatches work the workers will not admit). It covers the flavors the
    manager itself offers (a ClusterQueue's flavors must exist there; offer a worker-only flavor on the home
    cluster with capacity 0 to dispatch it).
- On each worker: the same namespace and a `LocalQueue` of the same name (`gpu-dispatch`; MultiKueue
  creates the remote workload in the same namespace and LocalQueue), pointing at the tenant's regular
  ClusterQueue there, so the worker admits dispatched work against the tenant's quota on that cluster.

The kube-apiserver enforces CEL rules the JSON-schema validation in infra.schemas does not evaluate
(`x-kubernetes-validations`): `check()` restates those of these kinds so a bad tree fails before delivery.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpufleet import k8s_names
from infra.manifests import Manifest
from scheduling.inputs import FlavorSpec, QuotaSpec
from scheduling.render import KUEUE, cluster_queue_name, host_resource_group, resource_groups
from tenants.render import TenantView, metadata

CONTROLLER = "kueue.x-k8s.io/multikueue"
KUEUE_GROUP = "kueue.x-k8s.io"
# Where Kueue's controller manager reads a worker kubeconfig from a Secret (upstream: key "kubeconfig").
KUBECONFIG_KEY = "kubeconfig"
DISPATCH_LOCAL_QUEUE = "gpu-dispatch"
# Upstream MultiKueueConfig.spec.clusters: minItems 1, maxItems 20, items unique.
MAX_WORKERS = 20


@dataclass(frozen=True)
class Worker:
    """A worker cluster as its manager sees it: the gpufleet cluster name and the Secret (in Kueue's
    namespace on the manager) that holds its kubeconfig."""

    cluster: str
    kubeconfig_secret: str = ""

    @property
    def secret(self) -> str:
        return self.kubeconfig_secret or default_secret_name(self.cluster)


def default_secret_name(cluster: str) -> str:
    return f"multikueue-{cluster}"


def dispatch_queue_name(slug: str) -> str:
    return f"{cluster_queue_name(slug)}-dispatch"


def admission_check_name(slug: str) -> str:
    return f"{cluster_queue_name(slug)}-multikueue"


def config_name(slug: str) -> str:
    return cluster_queue_name(slug)


# --- manager (home cluster) ------------------------------------------------------------------------


def multikueue_cluster_name(slug: str, worker: str) -> str:
    return f"{cluster_queue_name(slug)}-{worker}"


def multikueue_cluster(view: TenantView, worker: Worker) -> Manifest:
    return {
        "apiVersion": KUEUE,
        "kind": "MultiKueueCluster",
        "metadata": metadata(view, multikueue_cluster_name(view.slug, worker.cluster), namespaced=False),
        "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": worker.secret}}},
    }


def dispatch_quotas(worker_quotas: Mapping[str, Mapping[str, QuotaSpec]]) -> dict[str, QuotaSpec]:
    """Per flavor, the sum of the tenant's nominal quotas over its workers (no borrowing: the dispatch
    queue is in no cohort)."""
    total: dict[str, int] = {}
    for quotas in worker_quotas.values():
        for flavor, quota in quotas.items():
            total[flavor] = total.get(flavor, 0) + quota.nominal
    return {flavor: QuotaSpec(nominal) for flavor, nominal in sorted(total.items())}


def manager_tenant_objects(view: TenantView, manager: str, workers: Sequence[Worker], flavors: Sequence[FlavorSpec],
                           worker_quotas: Mapping[str, Mapping[str, QuotaSpec]]) -> list[Manifest]:
    """The tenant's MultiKueue objects on its home cluster `manager`. `workers` in preference order (Kueue's
    incremental dispatcher nominates them in this order); `flavors` the tenant may use and the manager
    offers; `worker_quotas` per worker cluster, per flavor. No workers: nothing (the mode is per tenant)."""
    if not workers:
        return []
    names = [w.cluster for w in workers]
    if manager in names:
        raise ValueError(f"cluster {manager!r} cannot be a MultiKueue worker of itself")
    if len(set(names)) != len(names):
        raise ValueError(f"tenant {view.slug}: worker clusters listed twice: {names}")
    if len(workers) > MAX_WORKERS:
        raise ValueError(f"tenant {view.slug}: {len(workers)} worker clusters; MultiKueue takes at most {MAX_WORKERS}")
    quotas = dispatch_quotas({w: q for w, q in worker_quotas.items() if w in names})
    used = [f for f in flavors if f.name in quotas]
    spec: dict[str, Any] = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": view.namespace}},
        "queueingStrategy": "BestEffortFIFO",
        "resourceGroups": [*resource_groups(used, quotas, cohort=False), host_resource_group(used, quotas)],
        "admissionChecksStrategy": {"admissionChecks": [{"name": admission_check_name(view.slug)}]},
    }
    if view.suspended:
        spec["stopPolicy"] = "Hold"
    return [
        {"apiVersion": KUEUE, "kind": "ClusterQueue",
         "metadata": metadata(view, dispatch_queue_name(view.slug), namespaced=False), "spec": spec},
        {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": metadata(view, DISPATCH_LOCAL_QUEUE),
         "spec": {"clusterQueue": dispatch_queue_name(view.slug)}},
        {"apiVersion": KUEUE, "kind": "AdmissionCheck",
         "metadata": metadata(view, admission_check_name(view.slug), namespaced=False),
         "spec": {"controllerName": CONTROLLER,
                  "parameters": {"apiGroup": KUEUE_GROUP, "kind": "MultiKueueConfig",
                                 "name": config_name(view.slug)}}},
        {"apiVersion": KUEUE, "kind": "MultiKueueConfig",
         "metadata": metadata(view, config_name(view.slug), namespaced=False),
         "spec": {"clusters": [multikueue_cluster_name(view.slug, name) for name in names]}},
        *(multikueue_cluster(view, worker) for worker in workers),
    ]


# --- worker ----------------------------------------------------------------------------------------


def worker_tenant_objects(view: TenantView) -> list[Manifest]:
    """The tenant's objects on a worker it is dispatched to: the LocalQueue MultiKueue creates remote
    workloads in, feeding the tenant's regular ClusterQueue on that cluster."""
    return [{"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": metadata(view, DISPATCH_LOCAL_QUEUE),
             "spec": {"clusterQueue": cluster_queue_name(view.slug)}}]


# --- checks the API server would make (CEL) ----------------------------------------------------------


def check(manifests: Iterable[Manifest]) -> list[str]:
    """Problems in one cluster's MultiKueue objects: the CRDs' CEL rules (exactly one cluster source;
    unique clusters), references that must resolve on the same cluster (AdmissionCheck -> config ->
    clusters -> the queue's check), and no kubeconfig content anywhere in them."""
    objs = list(manifests)
    by_kind: dict[str, dict[str, Manifest]] = {}
    for m in objs:
        if m.get("apiVersion") == KUEUE:
            by_kind.setdefault(m["kind"], {})[m["metadata"]["name"]] = m
    problems: list[str] = []
    for name, mkc in by_kind.get("MultiKueueCluster", {}).items():
        source = mkc["spec"].get("clusterSource", {})
        if sum(key in source for key in ("kubeConfig", "clusterProfileRef")) != 1:
            problems.append(f"MultiKueueCluster {name}: exactly one of kubeConfig, clusterProfileRef must be set")
        kube = source.get("kubeConfig", {})
        if kube.get("locationType", "Secret") != "Secret":
            problems.append(f"MultiKueueCluster {name}: kubeconfig must come from a Secret, not {kube['locationType']}")
        if kube and k8s_names.dns1123_subdomain(kube.get("location", "")):
            problems.append(f"MultiKueueCluster {name}: location {kube.get('location')!r} is not a Secret name")
    for name, cfg in by_kind.get("MultiKueueConfig", {}).items():
        clusters = cfg["spec"].get("clusters", [])
        if not 1 <= len(clusters) <= MAX_WORKERS:
            problems.append(f"MultiKueueConfig {name}: {len(clusters)} clusters (1..{MAX_WORKERS})")
        if len(set(clusters)) != len(clusters):
            problems.append(f"MultiKueueConfig {name}: clusters must be unique")
        for cluster in clusters:
            if cluster not in by_kind.get("MultiKueueCluster", {}):
                problems.append(f"MultiKueueConfig {name}: no MultiKueueCluster {cluster}")
    for name, ac in by_kind.get("AdmissionCheck", {}).items():
        params = ac["spec"].get("parameters") or {}
        if ac["spec"].get("controllerName") == CONTROLLER and params.get("name") not in by_kind.get(
                "MultiKueueConfig", {}):
            problems.append(f"AdmissionCheck {name}: no MultiKueueConfig {params.get('name')}")
    for name, cq in by_kind.get("ClusterQueue", {}).items():
        for rule in (cq["spec"].get("admissionChecksStrategy") or {}).get("admissionChecks", []):
            if rule["name"] not in by_kind.get("AdmissionCheck", {}):
                problems.append(f"ClusterQueue {name}: no AdmissionCheck {rule['name']}")
    for m in objs:
        if m.get("kind") in {"MultiKueueCluster", "MultiKueueConfig", "AdmissionCheck"} and _inlined(m):
            problems.append(f"{m['kind']} {m['metadata']['name']}: carries kubeconfig content")
    return problems


def _inlined(value: Any) -> bool:
    """Whether kubeconfig content (a credential field or a whole kubeconfig/PEM text) appears in `value`."""
    if isinstance(value, dict):
        return any(k in _CREDENTIAL_KEYS or _inlined(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_inlined(v) for v in value)
    return isinstance(value, str) and any(marker in value for marker in _CREDENTIAL_MARKERS)


_CREDENTIAL_KEYS = frozenset({"client-key-data", "client-certificate-data", "certificate-authority-data", "token",
                              "kubeconfig", "password"})
_CREDENTIAL_MARKERS = ("kind: Config", "client-key-data", "-----BEGIN ", "current-context")
