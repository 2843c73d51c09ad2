"""Gather the facts `scheduling.pending.why.explain` needs: from the cluster (Kueue Workloads and ClusterQueues,
KAI PodGroups, pods, Jobs, nodes, NodeClaims) and from the database (trust level, quotas, cohort, flavors,
node pools). Only the tenant's own namespace is read for workloads: a tenant sees its own workloads only.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

from gpufleet.core import sharing
from infra.kube.nodes import ClusterOps
from scheduling.catalog import rules as catalog
from scheduling.models import Flavor, GpuNodePool, Quota, TenantScheduling
from scheduling.nodepools.render import POOL_LABEL
from scheduling.pending.why import Explanation, Facts, PoolState, QuotaState, explain
from scheduling.policy import allowed_modes
from scheduling.render import cluster_queue_name
from tenants.backends import kube_access
from tenants.models import Tenant

KUEUE = "kueue.x-k8s.io/v1beta2"
KAI_PODGROUPS = ("scheduling.run.ai/v2alpha2", "podgroups")
VCLUSTER_NAME = "vcluster.loft.sh/object-name"  # the pod's name inside the tenant's vCluster
KAI_POD_GROUP = "pod-group-name"  # annotation KAI's podgrouper sets on each pod of a group
KUEUE_POD_GROUP = "kueue.x-k8s.io/pod-group-name"
KARPENTER_POOL = "karpenter.sh/nodepool"


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("metadata") or {}


def _names(obj: dict[str, Any]) -> set[str]:
    """Every name a person may know this object by: its own, its owners', the vCluster name, group labels."""
    meta = _meta(obj)
    names = {str(meta.get("name") or "")}
    names |= {str(o.get("name")) for o in meta.get("ownerReferences") or [] if o.get("name")}
    for source in (meta.get("annotations") or {}, meta.get("labels") or {}):
        for key in (VCLUSTER_NAME, KUEUE_POD_GROUP, "job-name", "batch.kubernetes.io/job-name"):
            if source.get(key):
                names.add(str(source[key]))
    names.discard("")
    return names


def _int(raw: Any) -> int:
    try:
        return int(Decimal(str(raw)))
    except (InvalidOperation, ValueError):
        return 0


def _reserved(cq: dict[str, Any] | None, flavor: str, resource: str) -> int:
    status = (cq or {}).get("status") or {}
    for usage in status.get("flavorsReservation") or status.get("flavorsUsage") or []:
        if usage.get("name") != flavor:
            continue
        for item in usage.get("resources") or []:
            if item.get("name") == resource:
                return _int(item.get("total"))
    return 0


class Sources:
    def __init__(self, ops: ClusterOps) -> None:
        self.ops = ops
        self._flavors = list(Flavor.objects.all())

    # --- the platform's own state -----------------------------------------------------------------

    def base_facts(self, tenant: Tenant, name: str) -> Facts:
        sched = TenantScheduling.objects.select_related("cohort").filter(tenant=tenant).first()
        cohort = sched.cohort.name if sched and sched.cohort else ""
        resource_flavors: dict[str, list[str]] = {}
        for flavor in self._flavors:
            resource = catalog.resource_name(flavor.mode, flavor.mig_profile)
            resource_flavors.setdefault(resource, []).append(flavor.name)
        return Facts(tenant=tenant.slug, namespace=tenant.namespace, name=name, trust_level=tenant.trust_level,
                     allowed_modes=frozenset(allowed_modes(tenant)), cohort=cohort,
                     flavor_modes={f.name: f.mode for f in self._flavors}, resource_flavors=resource_flavors,
                     quotas=self.quotas(tenant, cohort), pools=self.pools())

    def quotas(self, tenant: Tenant, cohort: str) -> list[QuotaState]:
        members = [tenant.pk]
        if cohort:
            members = list(TenantScheduling.objects.filter(cohort__name=cohort).values_list("tenant_id", flat=True))
            members.append(tenant.pk)
        out = []
        queues: dict[str, dict[str, Any] | None] = {}
        for quota in Quota.objects.select_related("tenant", "flavor").filter(tenant_id__in=set(members)):
            slug = quota.tenant.slug
            if slug not in queues:
                queues[slug] = self.ops.cluster_scoped(KUEUE, "clusterqueues", cluster_queue_name(slug))
            resource = catalog.resource_name(quota.flavor.mode, quota.flavor.mig_profile)
            out.append(QuotaState(slug, quota.flavor.name, quota.nominal, quota.borrowing_limit, quota.lending_limit,
                                  _reserved(queues[slug], quota.flavor.name, resource)))
        return sorted(out, key=lambda q: (q.flavor, q.tenant))

    def pools(self) -> list[PoolState]:
        pools = list(GpuNodePool.objects.select_related("flavor"))
        if not pools:
            return []
        nodes = self.ops.nodes()
        claims = self.ops.nodeclaims()
        out = []
        for pool in pools:
            gpus = sum(_int(v) for n in nodes
                       if (_meta(n).get("labels") or {}).get(POOL_LABEL) == pool.name
                       or (_meta(n).get("labels") or {}).get(KARPENTER_POOL) == pool.name
                       for k, v in ((n.get("status") or {}).get("capacity") or {}).items()
                       if sharing.counts_gpus(k))
            launching = tuple(sorted(
                str(_meta(c).get("name")) for c in claims
                if (_meta(c).get("labels") or {}).get(KARPENTER_POOL) == pool.name
                and not any(x.get("type") == "Ready" and x.get("status") == "True"
                            for x in (c.get("status") or {}).get("conditions") or [])))
            out.append(PoolState(pool.name, pool.flavor.name, pool.gpu_limit, gpus, launching))
        return out

    # --- the tenant's workloads -------------------------------------------------------------------

    def _namespace_objects(self, namespace: str) -> tuple[list[dict], list[dict], list[dict], list[dict]]:
        workloads = self.ops.namespaced(KUEUE, "workloads", namespace)
        podgroups = self.ops.namespaced(*KAI_PODGROUPS, namespace)
        pods = self.ops.namespaced("v1", "pods", namespace)
        jobs = self.ops.namespaced("batch/v1", "jobs", namespace)
        return workloads, podgroups, pods, jobs

    def facts(self, tenant: Tenant, name: str) -> Facts:
        workloads, podgroups, pods, jobs = self._namespace_objects(tenant.namespace)
        return self._facts_for(tenant, name, workloads, podgroups, pods, jobs)

    def _facts_for(self, tenant: Tenant, name: str, workloads: list[dict], podgroups: list[dict], pods: list[dict],
                   jobs: list[dict], base: Facts | None = None) -> Facts:
        facts = base or self.base_facts(tenant, name)
        facts.name = name
        facts.workload = next((w for w in workloads if name in _names(w)), None)
        facts.podgroup = next((g for g in podgroups if name in _names(g)), None)
        known = {name}
        for obj in (facts.workload, facts.podgroup):
            if obj:
                known |= _names(obj)
        group = str(_meta(facts.podgroup or {}).get("name") or "")
        facts.pods = [p for p in pods if _names(p) & known
                      or (group and (_meta(p).get("annotations") or {}).get(KAI_POD_GROUP) == group)]
        facts.owner = next((j for j in jobs if name in _names(j)), None)
        if facts.owner is None and facts.pods:
            facts.owner = next((p for p in facts.pods if name in _names(p)), facts.pods[0])
        if facts.owner is not None:
            facts.owner = {"kind": "Job" if facts.owner in jobs else "Pod", **facts.owner}
        return facts

    def explain(self, tenant: Tenant, name: str) -> Explanation:
        return explain(self.facts(tenant, name))

    def explain_all(self, tenant: Tenant) -> list[Explanation]:
        """Every workload of the tenant: Kueue Workloads, PodGroups without one, and GPU Jobs and pods
        Kueue never saw."""
        workloads, podgroups, pods, jobs = self._namespace_objects(tenant.namespace)
        base = self.base_facts(tenant, "")
        seen: set[str] = set()
        names: list[str] = []

        def add(obj: dict[str, Any], key: Callable[[dict[str, Any]], str]) -> None:
            known = _names(obj)
            if known & seen:
                return
            seen.update(known)
            names.append(key(obj))

        for obj in workloads + podgroups:
            add(obj, lambda o: str(_meta(o).get("name")))
        for obj in jobs + [p for p in pods if _requests_gpu(p)]:
            add(obj, lambda o: str(_meta(o).get("name")))
        out = []
        for name in names:
            facts = self._facts_for(tenant, name, workloads, podgroups, pods, jobs,
                                    base=Facts(**{**base.__dict__, "pods": [], "workload": None, "podgroup": None,
                                                  "owner": None}))
            try:
                out.append(explain(facts))
            except LookupError:
                continue
        return out


def _requests_gpu(pod: dict[str, Any]) -> bool:
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        for kind in ("requests", "limits"):
            if any(sharing.counts_gpus(k) for k in resources.get(kind) or {}):
                return True
    return False


def cluster_ops() -> ClusterOps:
    """The cluster the explanations read (direct API access in either backend mode; tests replace it)."""
    from infra.kube.backend import KubernetesBackend  # the kubernetes client loads only when asked

    return ClusterOps(KubernetesBackend.from_access(kube_access()))
