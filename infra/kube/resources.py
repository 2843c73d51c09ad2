"""Which REST resource serves a kind, learnt from the API server's discovery documents.

We ask the server (GET /api/v1, /apis/<group>/<version>) instead of keeping a table of plurals:
the answer is then right for whatever CRD versions the cluster runs, and a group the cluster does
not serve is known as such (nothing of that kind can exist, so there is nothing to prune).
"""

from __future__ import annotations

from dataclasses import dataclass

# Every apiVersion/kind gpufleet's renderers emit, with its REST plural: THE one list. The backend prunes
# exactly these kinds (the "prune allowlist", like `kubectl apply --prune`: objects of other kinds are never
# touched, even if someone copied our labels onto them), and the chart's ClusterRole grants exactly
# `cluster_role_rules()` (tests/helm/test_rbac.py keeps helm/gpufleet/templates/rbac.yaml equal to it, and
# checks that a full demo fleet renders exactly these kinds: none missing, none never rendered).
RENDERED_KINDS: tuple[tuple[str, str, str], ...] = (
    ("v1", "Namespace", "namespaces"),
    ("v1", "ResourceQuota", "resourcequotas"),
    ("v1", "LimitRange", "limitranges"),
    ("kueue.x-k8s.io/v1beta2", "ResourceFlavor", "resourceflavors"),
    ("kueue.x-k8s.io/v1beta2", "Cohort", "cohorts"),
    # No longer rendered (issue 26, B1), kept so the backend prunes the ones an earlier release applied.
    ("kueue.x-k8s.io/v1beta2", "Topology", "topologies"),
    ("kueue.x-k8s.io/v1beta2", "WorkloadPriorityClass", "workloadpriorityclasses"),
    ("kueue.x-k8s.io/v1beta2", "ClusterQueue", "clusterqueues"),
    ("kueue.x-k8s.io/v1beta2", "LocalQueue", "localqueues"),
    ("scheduling.run.ai/v2", "Queue", "queues"),
    ("kai.scheduler/v1alpha1", "Topology", "topologies"),
    ("cilium.io/v2", "CiliumNetworkPolicy", "ciliumnetworkpolicies"),
    ("cilium.io/v2", "CiliumClusterwideNetworkPolicy", "ciliumclusterwidenetworkpolicies"),
    ("kyverno.io/v1", "Policy", "policies"),
    ("karpenter.sh/v1", "NodePool", "nodepools"),
    ("karpenter.sh/v1alpha1", "NodeOverlay", "nodeoverlays"),
    ("source.toolkit.fluxcd.io/v1", "HelmRepository", "helmrepositories"),
    ("source.toolkit.fluxcd.io/v1", "OCIRepository", "ocirepositories"),
    ("helm.toolkit.fluxcd.io/v2", "HelmRelease", "helmreleases"),
    ("keda.sh/v1alpha1", "ScaledObject", "scaledobjects"),
    # The vCluster's serving CA, copied from OpenBao by External Secrets (tenants/isolation/vcluster.py).
    ("external-secrets.io/v1", "ExternalSecret", "externalsecrets"),
    # Inference endpoints (scheduling.endpoints): serving Deployment, its Service and scrape object.
    ("apps/v1", "Deployment", "deployments"),
    ("v1", "Service", "services"),
    ("operator.victoriametrics.com/v1beta1", "VMServiceScrape", "vmservicescrapes"),
    # The fleet's capacity alerts (scheduling.fleetops.render): one of the two, chosen by FleetSettings.rule_kind.
    ("monitoring.coreos.com/v1", "PrometheusRule", "prometheusrules"),
    ("operator.victoriametrics.com/v1beta1", "VMRule", "vmrules"),
)
PRUNE_KINDS: tuple[tuple[str, str], ...] = tuple((api_version, kind) for api_version, kind, _ in RENDERED_KINDS)
# Kinds in the list only to prune what earlier releases rendered (none is rendered any more).
PRUNED_ONLY_KINDS: frozenset[tuple[str, str]] = frozenset({("kueue.x-k8s.io/v1beta2", "Topology")})

# What the backend does to those kinds: server-side apply (PATCH; creating through apply also needs
# `create`), get one, list by owner label (prune), delete (prune). No update (PUT), no watch.
APPLY_VERBS = ("get", "list", "create", "patch", "delete")
# Resources gpufleet only reads, never writes or prunes: (API group, plural). `get`/`list` only, e.g. for a
# diagnostic command that inspects the components' configuration: `gpufleet doctor` (scheduling/doctor.py)
# reads CRDs, Kueue's manager ConfigMap, HAMi's webhook configuration, nodes' topology labels and the
# Karpenter node class (AWS's EC2NodeClass by default; another provider's class needs its own rule).
READ_ONLY_RESOURCES: tuple[tuple[str, str], ...] = (
    ("apiextensions.k8s.io", "customresourcedefinitions"),
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"),
    ("", "nodes"),
    ("", "configmaps"),
    ("karpenter.k8s.aws", "ec2nodeclasses"),
    # The ClusterSecretStore that delivers the vCluster serving CA (doctor check vcluster/ca).
    ("external-secrets.io", "clustersecretstores"),
)
# Node health remediation and pending-workload explanations (scheduling.nodehealth, scheduling.pending):
# the narrow direct access the platform needs in either backend mode (infra/kube/nodes.py). Writes are
# only: cordon/uncordon (patch nodes), evictions (create pods/eviction: the API server enforces
# PodDisruptionBudgets; no delete on pods), and deleting a Karpenter NodeClaim so the node is replaced.
# Reads: pods (what to evict, gang members), Kueue Workloads, KAI PodGroups, Jobs.
REMEDIATION_RULES: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("", ("nodes",), ("patch",)),
    ("", ("pods",), ("get", "list")),
    ("", ("pods/eviction",), ("create",)),
    ("batch", ("jobs",), ("get", "list")),
    ("karpenter.sh", ("nodeclaims",), ("get", "list", "delete")),
    ("kueue.x-k8s.io", ("workloads",), ("get", "list")),
    ("scheduling.run.ai", ("podgroups",), ("get", "list")),
)
# The only Secret gpufleet reads (tenants/secrets.py): vCluster's admin kubeconfig in each tenant
# namespace, for the OpenBao Kubernetes auth; `get` by name, nothing else on Secrets.
READ_SECRET_NAMES = ("vc-vcluster",)


def cluster_role_rules() -> list[dict[str, list[str]]]:
    """The ClusterRole rules the kubernetes backend needs, one rule per API group, sorted."""
    groups: dict[str, set[str]] = {}
    for api_version, _, plural in RENDERED_KINDS:
        groups.setdefault(api_version.rpartition("/")[0], set()).add(plural)
    rules = [{"apiGroups": [group], "resources": sorted(plurals), "verbs": list(APPLY_VERBS)}
             for group, plurals in sorted(groups.items())]
    read: dict[str, set[str]] = {}
    for group, plural in READ_ONLY_RESOURCES:
        read.setdefault(group, set()).add(plural)
    rules += [{"apiGroups": [group], "resources": sorted(plurals), "verbs": ["get", "list"]}
              for group, plurals in sorted(read.items())]
    rules += [{"apiGroups": [group], "resources": list(resources), "verbs": list(verbs)}
              for group, resources, verbs in REMEDIATION_RULES]
    rules.append({"apiGroups": [""], "resources": ["secrets"], "resourceNames": list(READ_SECRET_NAMES),
                  "verbs": ["get"]})
    return rules


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
