"""`gpufleet doctor`: a cluster's actual configuration against the compatibility matrix. Pure checks.

Each check reads through `read(path) -> dict | None` (a GET on the Kubernetes API, None for 404; the
command passes KubernetesBackend.read) and reports what is wrong and what to do. Nothing is written.
What is expected comes from the same code that renders the platform (scheduling.prerequisites,
scheduling.nodepools), so the doctor and the GitOps output cannot disagree.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import yaml

from infra.errors import InfraError
from scheduling.catalog import rules as catalog
from scheduling.nodepools import render as nodepools
from tenants import syncer_gates

from .inputs import Catalog
from .prerequisites import (
    COMPONENTS,
    HAMI_WEBHOOK_SCOPE,
    KARPENTER,
    KUEUE_FRAMEWORKS,
    PLATFORM_NAMESPACES,
    VM_OPERATOR,
    kueue_configuration,
)

Read = Callable[[str], dict[str, Any] | None]
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
KUEUE_CONFIG = ("kueue-system", "kueue-manager-config", "controller_manager_config.yaml")
HAMI_WEBHOOK = "vgpu.hami.io"
HAMI_IGNORE = {"key": "hami.io/webhook", "operator": "NotIn", "values": ["ignore"]}


@dataclass(frozen=True)
class Finding:
    check: str
    ok: bool
    detail: str
    fix: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _ok(check: str, detail: str) -> Finding:
    return Finding(check, True, detail)


def _fail(check: str, detail: str, fix: str) -> Finding:
    return Finding(check, False, detail, fix)


def check_crd(read: Read, check: str, name: str, version: str, *, missing: str, install: str, upgrade: str,
              ok: str = "") -> Finding:
    """One CRD that must serve `version`: `missing` is the detail when it is absent (fix `install`), `upgrade` the
    fix when it serves other versions."""
    crd = read(CRD_PATH + name)
    if crd is None:
        return _fail(check, missing, install)
    served = [v["name"] for v in (crd.get("spec") or {}).get("versions", []) if v.get("served")]
    if version not in served:
        return _fail(check, f"{name} serves {', '.join(served) or 'nothing'}, the platform needs {version}", upgrade)
    return _ok(check, f"{name} serves {version}{ok}")


def check_crds(read: Read) -> list[Finding]:
    return [check_crd(read, f"crd/{name}", name, version,
                      missing=f"{name} is not installed ({component.name} {component.supported})",
                      install=f"install {component.name} {component.version} (gpufleet render --platform)",
                      upgrade=f"upgrade {component.name} to {component.supported}")
            for component in (*COMPONENTS, KARPENTER, VM_OPERATOR) for name, version in component.crds]


def check_kueue_config(read: Read, cat: Catalog) -> list[Finding]:
    namespace, name, key = KUEUE_CONFIG
    check = "kueue/configuration"
    fix = "install Kueue with the platform's HelmRelease (managerConfig.controllerManagerConfigYaml)"
    cm = read(f"/api/v1/namespaces/{namespace}/configmaps/{name}")
    if cm is None or key not in (cm.get("data") or {}):
        return [_fail(check, f"ConfigMap {namespace}/{name} with {key} not found", fix)]
    try:
        actual = yaml.safe_load(cm["data"][key]) or {}
    except yaml.YAMLError as exc:
        return [_fail(check, f"{key} is not YAML: {exc}", fix)]
    wanted = kueue_configuration(cat)
    out = []
    if actual.get("manageJobsWithoutQueueName", False) is not False:
        out.append(_fail(f"{check}/manageJobsWithoutQueueName", "is true: Kueue gates every pod, including "
                         "the vCluster control plane", "set manageJobsWithoutQueueName: false"))
    if actual.get("managedJobsNamespaceSelector") != wanted["managedJobsNamespaceSelector"]:
        out.append(_fail(f"{check}/managedJobsNamespaceSelector",
                         f"is {actual.get('managedJobsNamespaceSelector')!r}: pod integrations would act outside "
                         "tenant namespaces (or not in them)",
                         f"set it to {wanted['managedJobsNamespaceSelector']!r}"))
    if not (actual.get("metrics") or {}).get("enableClusterQueueResources"):
        out.append(_fail(f"{check}/metrics", "metrics.enableClusterQueueResources is off: Kueue reports no "
                         "kueue_cluster_queue_resource_usage, so the expansion-review alert never fires",
                         "set metrics.enableClusterQueueResources: true"))
    frameworks = set((actual.get("integrations") or {}).get("frameworks") or [])
    missing = [f for f in KUEUE_FRAMEWORKS if f not in frameworks]
    if missing:
        out.append(_fail(f"{check}/integrations", f"missing frameworks {', '.join(missing)}: those workloads "
                         "would run without admission", "add them to integrations.frameworks"))
    has_fair_sharing = "fairSharing" in actual
    if has_fair_sharing != cat.fair_sharing:
        out.append(_fail(f"{check}/fairSharing",
                         "fair sharing is " + ("on" if has_fair_sharing else "off") + " but GPUFLEET_KUEUE_FAIR_"
                         "SHARING is " + str(cat.fair_sharing),
                         "render the platform again and let Flux apply the Kueue HelmRelease"))
    return out or [_ok(check, "queue-named jobs only, tenant namespaces, all integrations, fair sharing as set")]


def check_hami_webhook(read: Read, cat: Catalog) -> list[Finding]:
    check = "hami/webhook"
    uses_hami = any(f.mode == catalog.HAMI for f in cat.flavors)
    found = read("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations") or {}
    hooks = [h for cfg in found.get("items", []) for h in cfg.get("webhooks", []) if h.get("name") == HAMI_WEBHOOK]
    if not hooks:
        if uses_hami:
            return [_fail(check, "HAMi flavors exist but HAMi's webhook is not installed",
                          "install HAMi 2.10.0 with the platform's HelmRelease")]
        return [_ok(check, "HAMi is not installed and no flavor uses it")]
    out = []
    for hook in hooks:
        expressions = (hook.get("namespaceSelector") or {}).get("matchExpressions") or []
        if HAMI_IGNORE not in expressions:
            out.append(_fail(check, "the webhook's namespaceSelector does not skip hami.io/webhook=ignore: it "
                                    "rewrites whole-GPU pods of standard/untrusted tenants (gpucores, "
                                    "hami-scheduler)", "set scheduler.admissionWebhook.manageNamespaceSelector: true"))
        names = next((e.get("values", []) for e in expressions if e.get("key") == "kubernetes.io/metadata.name"), [])
        if HAMI_WEBHOOK_SCOPE not in expressions:
            out.append(_fail(f"{check}/tenant-namespaces", "the webhook is called outside tenant namespaces: it "
                             "denies the GPU operator's validator pods (nodeName set, nvidia.com/gpu)",
                             "set scheduler.admissionWebhook.namespaceSelector.matchExpressions to "
                             f"[{{key: {HAMI_WEBHOOK_SCOPE['key']}, operator: Exists}}]"))
        skipped = [ns for ns in PLATFORM_NAMESPACES if ns not in names]
        if skipped:
            out.append(_fail(f"{check}/platform-namespaces", f"mutates pods in {', '.join(skipped)}",
                             "set scheduler.admissionWebhook.whitelistNamespaces to the platform namespaces"))
    return out or [_ok(check, "tenant namespaces only; skips ignored and platform namespaces")]


def check_node_pools(read: Read, cat: Catalog) -> list[Finding]:
    out = []
    listed = read("/apis/karpenter.sh/v1/nodepools")
    if listed is None:
        return [_fail("karpenter/nodepools", "karpenter.sh/v1 NodePools are not served", "install Karpenter >= 1.0")]
    actual = {p["metadata"]["name"]: p for p in listed.get("items", [])}
    for pool in cat.node_pools:
        check = f"karpenter/nodepool/{pool.name}"
        have = actual.get(pool.name)
        if have is None:
            out.append(_fail(check, "not on the cluster", "let Flux apply the platform's NodePools"))
            continue
        labels = (have.get("spec", {}).get("template", {}).get("metadata") or {}).get("labels") or {}
        wanted = nodepools.pool_labels(pool, cat)
        wrong = sorted(k for k, v in wanted.items() if labels.get(k) != v)
        if wrong:
            out.append(_fail(check, f"template labels {', '.join(wrong)} differ: Kueue-placed pods select them "
                                    "and Karpenter refuses undefined custom labels",
                             "let Flux apply the platform's NodePools"))
        else:
            out.append(_ok(check, "carries the flavor's labels"))
        out.extend(check_node_class(read, have, check))
        if nodepools.overlay_capacity(pool):
            out.append(check_node_overlay(read))
    return out


def check_node_class(read: Read, pool: dict[str, Any], check: str) -> list[Finding]:
    ref = pool.get("spec", {}).get("template", {}).get("spec", {}).get("nodeClassRef") or {}
    group, kind, name = ref.get("group", ""), ref.get("kind", ""), ref.get("name", "")
    discovery = read(f"/apis/{group}") if group else None
    version = ((discovery or {}).get("preferredVersion") or {}).get("version")
    if not version:
        return [_fail(f"{check}/nodeclass", f"API group {group or '(none)'} is not served",
                      "install the Karpenter cloud provider whose node class the pool names")]
    resources = read(f"/apis/{group}/{version}") or {}
    plural = next((r["name"] for r in resources.get("resources", []) if r.get("kind") == kind), None)
    if plural is None or read(f"/apis/{group}/{version}/{plural}/{name}") is None:
        return [_fail(f"{check}/nodeclass", f"{kind} {name} does not exist",
                      f"create the {kind} {name} (GPUFLEET_KARPENTER_NODE_CLASS_KIND) or point the pool at one")]
    return [_ok(f"{check}/nodeclass", f"{kind} {name} exists")]


def check_node_overlay(read: Read) -> Finding:
    """The CRD; whether Karpenter runs with the NodeOverlay gate is checked per cluster
    (scheduling.doctor_clusters.check_node_overlay_gate, issue 26 F4)."""
    check = "karpenter/nodeoverlay"
    if read(CRD_PATH + "nodeoverlays.karpenter.sh") is None:
        return _fail(check, "MIG/HAMi pools need NodeOverlays (capacity Karpenter cannot know) but the CRD is absent",
                     "install Karpenter >= 1.7 with settings.featureGates.nodeOverlay=true")
    return _ok(check, "NodeOverlay CRD present")


def check_topology_labels(read: Read, cat: Catalog) -> list[Finding]:
    """The topology levels (KAI's Topology) on the nodes of every pool's flavor."""
    aware = {p.flavor.name for p in cat.node_pools} if cat.topology_levels else set()
    if not aware:
        return [_ok("topology/nodes", "no topology levels configured")]
    nodes = (read("/api/v1/nodes") or {}).get("items", [])
    out = []
    for node in nodes:
        labels = node.get("metadata", {}).get("labels") or {}
        if labels.get(nodepools.FLAVOR_LABEL) not in aware:
            continue
        missing = [level for level in cat.topology_levels if level not in labels]
        if missing:
            out.append(_fail(f"topology/node/{node['metadata']['name']}",
                             f"lacks {', '.join(missing)}: KAI's topology does not place flavor "
                             f"{labels[nodepools.FLAVOR_LABEL]}'s pods on it",
                             "label the node (or its NodePool template) with every topology level"))
    return out or [_ok("topology/nodes", "every node of a pool's flavor carries the levels")]


KUEUE_API = "/apis/kueue.x-k8s.io/v1beta2"
HELM_RELEASES = "/apis/helm.toolkit.fluxcd.io/v2/helmreleases"
RESTRICTED = ("pod-security.kubernetes.io/enforce", "restricted")


def check_kueue_topology(read: Read, cat: Catalog) -> list[Finding]:
    """B1 (issue 26): a ResourceFlavor with topologyName in a ClusterQueue that is not TAS-only refuses every pod
    without a topology request, and TAS never gets a node from Karpenter (nodepools.kueue_tas_refusal)."""
    check = "kueue/topology"
    flavors = (read(f"{KUEUE_API}/resourceflavors") or {}).get("items", [])
    tas = {f["metadata"]["name"]: f["spec"]["topologyName"] for f in flavors
           if (f.get("spec") or {}).get("topologyName")}
    if not tas:
        return [_ok(check, "no ResourceFlavor uses topology-aware scheduling")]
    queues = (read(f"{KUEUE_API}/clusterqueues") or {}).get("items", [])
    out = []
    for name, topology in sorted(tas.items()):
        users = sorted(q["metadata"]["name"] for q in queues
                       if any(fl.get("name") == name for g in q.get("spec", {}).get("resourceGroups", [])
                              for fl in g.get("flavors", [])))
        spec = cat.flavor(name)
        why = nodepools.kueue_tas_refusal(spec, cat) if spec else "it is not one of the platform's flavors"
        out.append(_fail(f"{check}/{name}",
                         f"ResourceFlavor {name} has topologyName {topology} (used by "
                         f"{', '.join(users) or 'no queue'}): Kueue refuses every pod of those queues ({why})",
                         "topologyName is immutable (CEL), so the platform's apply without it is refused: remove "
                         "the flavor from every ClusterQueue (or create it anew under another name and move the "
                         f"quotas), then `kubectl delete resourceflavor {name}` (Kueue's resource-in-use finalizer "
                         "holds it until no ClusterQueue lists it) and reconcile (docs/compatibility.md, B1)"))
    return out


def _vcluster_releases(read: Read) -> list[dict[str, Any]] | None:
    listed = read(HELM_RELEASES)
    if listed is None:
        return None
    return [r for r in listed.get("items", []) if (r.get("spec") or {}).get("releaseName") == "vcluster"]


def _image_ref(image: Any) -> str:
    if isinstance(image, dict):
        ref = "/".join(p for p in (image.get("registry", ""), image.get("repository", "")) if p)
        return f"{ref}:{image['tag']}" if image.get("tag") else ref
    return str(image or "")


def check_vcluster_syncers(read: Read, chart_version: str, syncer_image: str) -> list[Finding]:
    """B3 (issue 26): a syncer that strips Kueue's gates gets every GPU pod deleted (tenants.syncer_gates)."""
    fix = ("set GPUFLEET_VCLUSTER_SYNCER_IMAGE to a vCluster syncer built with loft-sh/vcluster commit 3a272b45a "
           "and reconcile; until then the platform refuses the tenants' GPU pods (docs/compatibility.md, B3)")
    # What the platform renders for every tenant (the next one included), then what each vCluster runs.
    problem = syncer_gates.problem(chart_version, syncer_image)
    out = [_fail("vcluster/syncer", problem, fix) if problem
           else _ok("vcluster/syncer", "the configured syncer keeps Kueue's scheduling gates")]
    for release in _vcluster_releases(read) or []:
        ns = release["metadata"].get("namespace", "")
        spec = release.get("spec") or {}
        version = (((spec.get("chart") or {}).get("spec") or {}).get("version")) or chart_version
        image = _image_ref(((spec.get("values") or {}).get("controlPlane") or {}).get("statefulSet", {}).get("image"))
        problem = syncer_gates.problem(version, image)
        out.append(_fail(f"vcluster/syncer/{ns}", problem, fix) if problem
                   else _ok(f"vcluster/syncer/{ns}", f"syncer {image or version} keeps Kueue's scheduling gates"))
    return out


def _tolerated(taint: dict[str, Any], tolerations: list[dict[str, Any]]) -> bool:
    """kube-scheduler's TaintToleration (k8s.io/api core/v1 ToleratesTaint): an empty key with Exists tolerates
    every taint; an effect, when given, must match; Exists ignores the value, Equal (default) compares it."""
    for t in tolerations:
        if t.get("effect") and t["effect"] != taint.get("effect"):
            continue
        if not t.get("key"):
            if t.get("operator") == "Exists":
                return True
            continue
        if t["key"] != taint.get("key"):
            continue
        if t.get("operator") == "Exists" or t.get("value", "") == taint.get("value", ""):
            return True
    return False


def pool_refusal(pool: dict[str, Any], selector: dict[str, str], tolerations: list[dict[str, Any]]) -> str:
    """"" when a pod with this nodeSelector and these tolerations could run on the pool's nodes."""
    template = (pool.get("spec") or {}).get("template") or {}
    labels = (template.get("metadata") or {}).get("labels") or {}
    wrong = sorted(k for k, v in selector.items() if labels.get(k) != v)
    if wrong:
        return f"its nodes lack {', '.join(f'{k}={selector[k]}' for k in wrong)}"
    for taint in (template.get("spec") or {}).get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerated(taint, tolerations):
            return f"does not tolerate {taint['key']}={taint.get('value', '')}:{taint['effect']}"
    return ""


def _enforced_tolerations(values: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for entry in (((values.get("sync") or {}).get("toHost") or {}).get("pods") or {}).get("enforceTolerations", []):
        key_value, _, effect = entry.partition(":")
        key, _, value = key_value.partition("=")
        out.append({"key": key, "operator": "Equal", "value": value, "effect": effect})
    return out


def check_vcluster_pods(read: Read) -> list[Finding]:
    """B4 (issue 26): the virtual cluster's CoreDNS passes its namespace's Pod Security level, and a dedicated
    tenant's pods without GPUs have a NodePool (vCluster puts the dedicated nodeSelector on every synced pod)."""
    releases = _vcluster_releases(read)
    if releases is None:
        return [_ok("vcluster/pods", "Flux's HelmRelease API is not served: no vCluster to check")]
    pools = (read("/apis/karpenter.sh/v1/nodepools") or {}).get("items", [])
    out = []
    for release in releases:
        ns = release["metadata"].get("namespace", "")
        target = (release.get("spec") or {}).get("targetNamespace") or ns
        values = (release.get("spec") or {}).get("values") or {}
        labels = ((read(f"/api/v1/namespaces/{target}") or {}).get("metadata") or {}).get("labels") or {}
        if labels.get(RESTRICTED[0]) == RESTRICTED[1]:
            security = (((values.get("controlPlane") or {}).get("coredns") or {}).get("security") or {})
            seccomp = ((security.get("podSecurityContext") or {}).get("seccompProfile") or {}).get("type")
            standard = (values.get("policies") or {}).get("podSecurityStandard")
            if seccomp not in ("RuntimeDefault", "Localhost") and not standard:
                out.append(_fail(f"vcluster/coredns/{target}",
                                 "the virtual cluster's CoreDNS has no seccomp profile (vCluster sets one only from "
                                 "controlPlane.coredns.security.podSecurityContext or policies.podSecurityStandard) "
                                 "and Pod Security `restricted` refuses it: the tenant has no DNS",
                                 "reconcile the tenant (the platform sets controlPlane.coredns.security."
                                 "podSecurityContext.seccompProfile: RuntimeDefault; docs/compatibility.md, B4)"))
            else:
                out.append(_ok(f"vcluster/coredns/{target}", "CoreDNS passes Pod Security restricted"))
        nodes = (((values.get("sync") or {}).get("fromHost") or {}).get("nodes") or {})
        selector = (nodes.get("selector") or {}).get("labels") or {}
        if not (nodes.get("enabled") and selector):
            continue
        tolerations = _enforced_tolerations(values)
        fits = [p["metadata"]["name"] for p in pools if not pool_refusal(p, selector, tolerations)]
        if fits:
            out.append(_ok(f"vcluster/cpu-nodes/{target}", f"pods without GPUs run on NodePool {', '.join(fits)}"))
        else:
            out.append(_fail(f"vcluster/cpu-nodes/{target}",
                             f"no NodePool takes a pod with nodeSelector {selector} and only the enforced tolerations: "
                             "the tenant's CoreDNS and CPU pods stay Pending",
                             "reconcile the tenant (it renders a dedicated CPU NodePool; docs/compatibility.md, B4)"))
    return out


def check_hami_device_plugin(read: Read, cat: Catalog) -> list[Finding]:
    """B5 (issue 26): HAMi's device plugin runs on the HAMi pools' nodes (and only there)."""
    check = "hami/device-plugin"
    hami_pools = [p.name for p in cat.node_pools if p.flavor.mode == catalog.HAMI]
    if not any(f.mode == catalog.HAMI for f in cat.flavors):
        return [_ok(check, "no HAMi flavor")]
    if not hami_pools:
        return [_fail(check, "HAMi flavors exist but no NodePool serves them: no node ever offers a HAMi share",
                      "gpufleet nodepool create <name> --flavor <hami flavor> --gpu-limit N")]
    ds = read("/apis/apps/v1/namespaces/hami-system/daemonsets/vgpu-device-plugin")
    if ds is None:
        return [_fail(check, "DaemonSet hami-system/vgpu-device-plugin not found",
                      "install HAMi 2.10.0 with the platform's HelmRelease")]
    pod = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
    selector, tolerations = pod.get("nodeSelector") or {}, pod.get("tolerations") or []
    live = {p["metadata"]["name"]: p for p in (read("/apis/karpenter.sh/v1/nodepools") or {}).get("items", [])}
    out = []
    for name in hami_pools:
        if name not in live:
            continue  # check_node_pools reports it
        refusal = pool_refusal(live[name], selector, tolerations)
        out.append(_fail(f"{check}/{name}", f"HAMi's device plugin never runs on NodePool {name}: {refusal}",
                         "let Flux apply the platform's HAMi HelmRelease (devicePlugin.nvidiaNodeSelector, "
                         "tolerations) and NodePools (docs/compatibility.md, B5)") if refusal
                   else _ok(f"{check}/{name}", "HAMi's device plugin runs on its nodes"))
    return out or [_ok(check, "the HAMi pools are not on the cluster yet")]


def diagnose(read: Read, cat: Catalog,
             more: Sequence[tuple[str, Callable[[], list[Finding]]]] = (), *,
             chart_version: str = "0.36.1", syncer_image: str = "") -> list[Finding]:
    """Every check; one the cluster refuses to answer (403, a timeout) is itself a failed finding, so a
    partial view never reads as a healthy cluster and never hides the other checks. `more`: further named
    checks (scheduling.doctor_blockers)."""
    checks: list[tuple[str, Callable[[], list[Finding]]]] = [
        ("crds", lambda: check_crds(read)),
        ("kueue/configuration", lambda: check_kueue_config(read, cat)),
        ("hami/webhook", lambda: check_hami_webhook(read, cat)),
        ("karpenter", lambda: check_node_pools(read, cat)),
        ("topology/nodes", lambda: check_topology_labels(read, cat)),
        ("kueue/topology", lambda: check_kueue_topology(read, cat)),
        ("vcluster/syncer", lambda: check_vcluster_syncers(read, chart_version, syncer_image)),
        ("vcluster/pods", lambda: check_vcluster_pods(read)),
        ("hami/device-plugin", lambda: check_hami_device_plugin(read, cat)),
        *more,
    ]
    out: list[Finding] = []
    for name, run in checks:
        try:
            out.extend(run())
        except InfraError as exc:
            out.append(_fail(name, f"cannot read the cluster: {exc}",
                             "grant the doctor get/list on the objects docs/compatibility.md lists"))
    return out
