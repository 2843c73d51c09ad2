"""`gpufleet doctor`: the blocker classes of issue 26 that stop a tenant on a real cluster -- the vCluster CA a
kubeconfig needs (B6), clusters the GitOps tools cannot address (B7), the bootstrap order of a fresh cluster (B2).

Pure checks over their inputs (settings, the registered clusters, the rendered platform tree) and the cluster's
answers through `read` (scheduling.doctor). docs/compatibility.md explains each.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from infra.manifests import installed_crds, ref
from scheduling.clusters import sync_objects

from . import doctor_review
from .doctor import CRD_PATH, Finding, Read, _fail, _ok

# API groups the platform does not install but renders objects of: they must be there before any tree is
# applied (Flux/Argo CD themselves, Cilium, Karpenter, the metrics operators, External Secrets).
PREINSTALLED_GROUPS = frozenset({
    "source.toolkit.fluxcd.io", "helm.toolkit.fluxcd.io", "kustomize.toolkit.fluxcd.io", "cilium.io",
    "karpenter.sh", "operator.victoriametrics.com", "monitoring.coreos.com", "external-secrets.io",
})
ESO_CRD = "externalsecrets.external-secrets.io"


def _custom(group: str) -> bool:
    """Served by a CRD (not by kube-apiserver itself: core, apps, *.k8s.io -- but *.x-k8s.io are CRDs)."""
    return "." in group and (not group.endswith(".k8s.io") or group.endswith(".x-k8s.io"))


def _established(crd: dict[str, Any] | None) -> bool:
    conditions = ((crd or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def check_vcluster_ca(read: Read, *, store: str, openbao: bool, bundle: str) -> list[Finding]:
    """B6: the kubeconfig can only verify a vCluster whose serving CA the platform knows."""
    check = "vcluster/ca"
    if not store:
        if bundle:
            return [_ok(check, f"kubeconfigs carry the operator's CA bundle {bundle} (the platform issues no CA)")]
        return [_fail(check, "no CA for the vClusters' serving certificates: each vCluster generates its own, the "
                             "kubeconfig carries none, kubectl fails with 'x509: certificate signed by unknown "
                             "authority'", "set GPUFLEET_VCLUSTER_CA_STORE (the platform issues each vCluster's CA) "
                             "or GPUFLEET_VCLUSTER_CA_BUNDLE")]
    out = []
    if not openbao:
        out.append(_fail(check, "GPUFLEET_VCLUSTER_CA_STORE is set but OpenBao is not configured: no CA is issued, "
                                "the vCluster control planes wait for their serving-CA Secret",
                         "configure GPUFLEET_OPENBAO_ADDR (and its credentials)"))
    crd = read(CRD_PATH + ESO_CRD)
    if crd is None:
        out.append(_fail(f"{check}/external-secrets", f"{ESO_CRD} is not installed: the CA never reaches the "
                         "tenant namespaces", "install External Secrets Operator (external-secrets.io/v1)"))
        return out
    found = read(f"/apis/external-secrets.io/v1/clustersecretstores/{store}")
    if found is None:
        out.append(_fail(f"{check}/store", f"ClusterSecretStore {store} does not exist",
                         f"create ClusterSecretStore {store} reading OpenBao (docs/compatibility.md, B6)"))
    elif not _established(found) and not any(c.get("type") == "Ready" and c.get("status") == "True"
                                              for c in (found.get("status") or {}).get("conditions") or []):
        out.append(_fail(f"{check}/store", f"ClusterSecretStore {store} is not Ready",
                         "check its OpenBao address, auth role and policy (read on platform/tenants/*)"))
    return out or [_ok(check, f"each vCluster's serving CA is issued into OpenBao and delivered through {store}")]


def check_delivery(targets: Iterable[sync_objects.SyncTarget]) -> list[Finding]:
    """B7: every cluster's tree can be addressed to that cluster by Argo CD and by Flux."""
    targets = list(targets)
    out = []
    for tool in ("argocd", "flux"):
        problems = sync_objects.delivery_problems(targets, tool)
        if problems:
            out.append(_fail(f"delivery/{tool}", "; ".join(problems),
                             "give each remote cluster its kube_api and the NAME of its kubeconfig Secret "
                             "(gpufleet cluster update)"))
        else:
            out.append(_ok(f"delivery/{tool}", f"{len(targets)} cluster(s), each addressed to itself"))
    return out


def check_bootstrap(read: Read, platform: list[dict[str, Any]]) -> list[Finding]:
    """B2: every custom resource of the platform tree has its CRD installed by a release of an earlier stage
    (or by a prerequisite), and those CRDs are Established on this cluster."""
    installs = installed_crds(platform)
    installed_groups = {name.partition(".")[2] for name in installs}
    known = installed_groups | PREINSTALLED_GROUPS
    orphans = sorted({f"{ref(m).kind}.{ref(m).group}" for m in platform
                      if _custom(ref(m).group) and ref(m).group not in known})
    out = []
    if orphans:
        out.append(_fail("bootstrap/order", f"no HelmRelease installs the CRDs of {', '.join(orphans)} and no "
                         "prerequisite serves them: on a fresh cluster their stage never applies",
                         "list the CRDs in the component's `crds` (scheduling.prerequisites.COMPONENTS)"))
    pending = [f"{name} (HelmRelease {installs[name]})" for name in sorted(installs)
               if not _established(read(CRD_PATH + name))]
    if pending:
        out.append(_fail("bootstrap/crds", f"not Established: {', '.join(pending)}; the configs and tenants "
                         "stages wait (Flux dependsOn, Argo CD retry, kube backend TransientError)",
                         "check the HelmReleases (flux get helmreleases -A)"))
    return out or [_ok("bootstrap/order", f"controllers -> configs -> tenants; {len(installs)} CRDs Established")]


def blocker_checks(read: Read, *, platform: Callable[[], list[dict[str, Any]]],
                   targets: Callable[[], list[sync_objects.SyncTarget]], store: str, openbao: bool,
                   bundle: str) -> list[tuple[str, Callable[[], list[Finding]]]]:
    return [
        ("vcluster/ca", lambda: check_vcluster_ca(read, store=store, openbao=openbao, bundle=bundle)),
        ("delivery", lambda: check_delivery(targets())),
        ("bootstrap", lambda: check_bootstrap(read, platform())),
        # Issue 26 review findings F8, F13, F15 (scheduling.doctor_review).
        ("argocd/progressive-syncs", lambda: doctor_review.check_progressive_syncs(read)),
        ("nodes/system", lambda: doctor_review.check_system_nodes(read)),
        ("webhooks/order", lambda: doctor_review.check_webhook_order(read)),
        # Review 2, N3: GPUs by environment variable (scheduling.doctor_review).
        ("gpu-operator/device-envvar", lambda: doctor_review.check_device_envvar(read)),
    ]
