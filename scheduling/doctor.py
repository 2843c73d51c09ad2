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

from . import nodepools
from .inputs import Catalog
from .prerequisites import (
    COMPONENTS,
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


def check_crds(read: Read) -> list[Finding]:
    out = []
    for component in (*COMPONENTS, KARPENTER, VM_OPERATOR):
        for name, version in component.crds:
            crd = read(CRD_PATH + name)
            check = f"crd/{name}"
            if crd is None:
                out.append(_fail(check, f"{name} is not installed ({component.name} {component.supported})",
                                 f"install {component.name} {component.version} (gpufleet render --platform)"))
                continue
            served = [v["name"] for v in crd.get("spec", {}).get("versions", []) if v.get("served")]
            if version not in served:
                out.append(_fail(check, f"{name} serves {', '.join(served) or 'nothing'}, the platform needs "
                                        f"{version}", f"upgrade {component.name} to {component.supported}"))
            else:
                out.append(_ok(check, f"{name} serves {version}"))
    return out


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
    uses_hami = any(f.mode == "hami" for f in cat.flavors)
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
        skipped = [ns for ns in PLATFORM_NAMESPACES if ns not in names]
        if skipped:
            out.append(_fail(f"{check}/platform-namespaces", f"mutates pods in {', '.join(skipped)}",
                             "set scheduler.admissionWebhook.whitelistNamespaces to the platform namespaces"))
    return out or [_ok(check, "skips ignored and platform namespaces")]


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
    check = "karpenter/nodeoverlay"
    if read(CRD_PATH + "nodeoverlays.karpenter.sh") is None:
        return _fail(check, "MIG/HAMi pools need NodeOverlays (capacity Karpenter cannot know) but the CRD is absent",
                     "install Karpenter >= 1.7 with settings.featureGates.nodeOverlay=true")
    deployment = read("/apis/apps/v1/namespaces/karpenter/deployments/karpenter")
    env = [e for c in ((deployment or {}).get("spec", {}).get("template", {}).get("spec", {})
                       .get("containers", [])) for e in c.get("env", [])]
    gates = next((e.get("value", "") for e in env if e.get("name") == "FEATURE_GATES"), None)
    if gates is not None and "NodeOverlay=true" not in gates:
        return _fail(check, f"FEATURE_GATES={gates!r}: NodeOverlays are ignored",
                     "set settings.featureGates.nodeOverlay=true in Karpenter's chart values")
    return _ok(check, "NodeOverlay CRD present" + ("" if gates is not None else " (feature gates not readable)"))


def check_topology_labels(read: Read, cat: Catalog) -> list[Finding]:
    aware = {f.name for f in cat.flavors if nodepools.topology_aware(f, cat)}
    if not aware:
        return [_ok("topology/nodes", "no flavor is topology-aware")]
    nodes = (read("/api/v1/nodes") or {}).get("items", [])
    out = []
    for node in nodes:
        labels = node.get("metadata", {}).get("labels") or {}
        if labels.get(nodepools.FLAVOR_LABEL) not in aware:
            continue
        missing = [level for level in cat.topology_levels if level not in labels]
        if missing:
            out.append(_fail(f"topology/node/{node['metadata']['name']}",
                             f"lacks {', '.join(missing)}: Kueue's topology-aware flavor "
                             f"{labels[nodepools.FLAVOR_LABEL]} does not count it",
                             "label the node (or its NodePool template) with every topology level"))
    return out or [_ok("topology/nodes", "every node of a topology-aware flavor carries the levels")]


def diagnose(read: Read, cat: Catalog,
             more: Sequence[tuple[str, Callable[[], list[Finding]]]] = ()) -> list[Finding]:
    """Every check; one the cluster refuses to answer (403, a timeout) is itself a failed finding, so a
    partial view never reads as a healthy cluster and never hides the other checks. `more`: further named
    checks (scheduling.doctor_blockers)."""
    checks: list[tuple[str, Callable[[], list[Finding]]]] = [
        ("crds", lambda: check_crds(read)),
        ("kueue/configuration", lambda: check_kueue_config(read, cat)),
        ("hami/webhook", lambda: check_hami_webhook(read, cat)),
        ("karpenter", lambda: check_node_pools(read, cat)),
        ("topology/nodes", lambda: check_topology_labels(read, cat)),
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
