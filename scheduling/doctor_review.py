"""`gpufleet doctor`: checks for the issue 26 review findings F8, F13 and F15 and review 2's N3 (docs/compatibility.md,
"Review log").

- F8: the Argo CD ApplicationSets order their three stages with `strategy: RollingSync`
  (scheduling.clusters.sync_objects), which the ApplicationSet controller honours only with progressive syncs enabled.
- F13: the vCluster control planes (and the synced CoreDNS) of tenants without dedicated nodes run on whatever
  untainted node the cluster has: the platform renders no NodePool for them.
- F15: the mutating webhooks run in the order of their configurations' names; HAMi's must come after Kyverno's.
- N3: the NVIDIA container toolkit must not take NVIDIA_VISIBLE_DEVICES from unprivileged containers.

Pure checks through `read` (scheduling.doctor), read-only.
"""

from __future__ import annotations

from typing import Any

from scheduling.clusters.sync_objects import PROGRESSIVE_SYNCS_CONFIGMAP, PROGRESSIVE_SYNCS_KEY

from .doctor import CRD_PATH, HAMI_WEBHOOK, Finding, Read, _fail, _ok

APPLICATIONSET_CRD = "applicationsets.argoproj.io"
# argoproj/argo-cd@v3.5.1: the flag, and the environment variable the stock manifest fills from the ConfigMap key
# (cmd/argocd-applicationset-controller/commands/applicationset_controller.go:311,
# manifests/base/applicationset-controller/argocd-applicationset-controller-deployment.yaml:154-157).
PROGRESSIVE_SYNCS_FLAG = "--enable-progressive-syncs"
PROGRESSIVE_SYNCS_ENV = "ARGOCD_APPLICATIONSET_CONTROLLER_ENABLE_PROGRESSIVE_SYNCS"
APPLICATIONSET_CONTROLLER = "argocd-applicationset-controller"
# Kyverno v1.19.0 resource webhooks: pkg/config/config.go:39 names the configuration, its webhooks are
# `mutate.kyverno.svc-ignore` / `-fail` (pkg/controllers/webhook/controller.go:930-972).
KYVERNO_WEBHOOK_PREFIX = "mutate.kyverno.svc"
KUEUE_POD_WEBHOOK = "mpod.kb.io"
MUTATING = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"


def _enabled(text: str | None) -> bool | None:
    """argo-cd util/env ParseBoolFromEnv (v3.5.1:util/env/env.go:184-193): "true"/"false" in any case; anything
    else (or nothing) leaves the default."""
    if text is None:
        return None
    lowered = text.strip().lower()
    return True if lowered == "true" else False if lowered == "false" else None


def _flag(args: list[str]) -> bool | None:
    for arg in args:
        if arg == PROGRESSIVE_SYNCS_FLAG:
            return True
        if arg.startswith(PROGRESSIVE_SYNCS_FLAG + "="):
            return _enabled(arg.partition("=")[2])
    return None


def check_progressive_syncs(read: Read, namespace: str = "argocd") -> list[Finding]:
    """F8: the ApplicationSet controller syncs the RollingSync steps in order only with progressive syncs on
    (default off); without, the strategy is ignored and the stages converge by retry (AllAtOnce)."""
    check = "argocd/progressive-syncs"
    if read(CRD_PATH + APPLICATIONSET_CRD) is None:
        return [_ok(check, "no ApplicationSet CRD on this cluster (Flux delivers, or Argo CD runs elsewhere: run "
                           "the doctor against that cluster)")]
    fix = (f'set `{PROGRESSIVE_SYNCS_KEY}: "true"` in ConfigMap {namespace}/{PROGRESSIVE_SYNCS_CONFIGMAP} and '
           f"restart {APPLICATIONSET_CONTROLLER} (docs/compatibility.md, F8)")
    cm = read(f"/api/v1/namespaces/{namespace}/configmaps/{PROGRESSIVE_SYNCS_CONFIGMAP}") or {}
    from_cm = _enabled((cm.get("data") or {}).get(PROGRESSIVE_SYNCS_KEY))
    deployment = read(f"/apis/apps/v1/namespaces/{namespace}/deployments/{APPLICATIONSET_CONTROLLER}")
    containers = (((deployment or {}).get("spec") or {}).get("template") or {}).get("spec", {}).get("containers", [])
    flag, env = None, None
    for container in containers:
        flag = _flag([*(container.get("command") or []), *(container.get("args") or [])])
        literal = next((e for e in container.get("env") or [] if e.get("name") == PROGRESSIVE_SYNCS_ENV), None)
        if literal is not None and "value" in literal:
            env = _enabled(literal["value"])
    # The flag wins; its default is the environment variable, which the stock manifest takes from the ConfigMap.
    enabled = flag if flag is not None else env if env is not None else from_cm
    where = ("the controller's flag" if flag is not None else "its environment" if env is not None
             else f"{namespace}/{PROGRESSIVE_SYNCS_CONFIGMAP}")
    if enabled:
        return [_ok(check, f"progressive syncs are on ({where}): the ApplicationSets sync controllers, configs, "
                           "tenants in order")]
    return [_fail(check, f"progressive syncs are off ({where}): the ApplicationSet controller ignores the "
                         "RollingSync strategy, so configs and tenants are synced at once with the controllers and "
                         "converge only by retry", fix)]


def _schedulable(node: dict[str, Any]) -> bool:
    """A pod without tolerations or a node selector can run there: schedulable, Ready (when reported), no
    NoSchedule/NoExecute taint."""
    spec, status = node.get("spec") or {}, node.get("status") or {}
    if spec.get("unschedulable"):
        return False
    ready = [c for c in status.get("conditions") or [] if c.get("type") == "Ready"]
    if ready and ready[0].get("status") != "True":
        return False
    return all(t.get("effect") not in ("NoSchedule", "NoExecute") for t in spec.get("taints") or [])


def check_system_nodes(read: Read) -> list[Finding]:
    """F13: the control planes of tenants without dedicated nodes (and the platform's own pods) need a node that
    takes a pod with no toleration: every GPU NodePool the platform renders is tainted."""
    check = "nodes/system"
    nodes = [n["metadata"]["name"] for n in (read("/api/v1/nodes") or {}).get("items", []) if _schedulable(n)]
    if nodes:
        return [_ok(check, f"{len(nodes)} untainted node(s) take the tenants' control planes (e.g. {nodes[0]})")]
    pools = [p["metadata"]["name"] for p in (read("/apis/karpenter.sh/v1/nodepools") or {}).get("items", [])
             if not any(t.get("effect") in ("NoSchedule", "NoExecute") for t in
                        ((p.get("spec") or {}).get("template") or {}).get("spec", {}).get("taints") or [])]
    if pools:
        return [_ok(check, f"no untainted node now; NodePool {', '.join(pools)} launches one for the control planes")]
    return [_fail(check, "no untainted node and no untainted NodePool: the vCluster control planes of tenants "
                         "without dedicated nodes (and their CoreDNS) stay Pending",
                  "keep a system node group (or a general-purpose Karpenter NodePool) without taints; the platform "
                  "renders only tainted GPU pools (docs/operator-guide.md, Prerequisites)")]


def check_webhook_order(read: Read) -> list[Finding]:
    """F15: the API server calls mutating webhook configurations sorted by name. HAMi's must sort after Kyverno's
    (Kyverno names kai-scheduler on whole/MIG pods, and HAMi skips a pod that names another scheduler; called
    first, HAMi would make a trusted tenant's whole GPU a HAMi card). Kueue's pod webhook must sort after Kyverno's
    or be called again (`reinvocationPolicy: IfNeeded`) to see the queue label Kyverno adds."""
    check = "webhooks/order"
    configs = (read(MUTATING) or {}).get("items", [])

    def holder(match: Any) -> tuple[str, dict[str, Any]] | None:
        for cfg in sorted(configs, key=lambda c: c["metadata"]["name"]):
            for hook in cfg.get("webhooks") or []:
                if match(hook.get("name", "")):
                    return cfg["metadata"]["name"], hook
        return None

    kyverno = holder(lambda name: name.startswith(KYVERNO_WEBHOOK_PREFIX))
    hami = holder(lambda name: name == HAMI_WEBHOOK)
    kueue = holder(lambda name: name == KUEUE_POD_WEBHOOK)
    if kyverno is None:
        return [_fail(check, "Kyverno's resource webhook is not registered: no GPU pod gets its queue label, KAI "
                             "queue or scheduler", "install Kyverno with the platform's HelmRelease and check that "
                                                   "its admission controller is running")]
    out = []
    if hami is not None and hami[0] <= kyverno[0]:
        out.append(_fail(f"{check}/hami", f"HAMi's webhook configuration {hami[0]} is called before Kyverno's "
                         f"{kyverno[0]}: HAMi rewrites a trusted tenant's whole-GPU pods (hami-scheduler) before "
                         "Kyverno names kai-scheduler", "install HAMi with the platform's values (fullnameOverride: "
                         "vgpu, so its configuration is vgpu-webhook; docs/scheduling.md, Admission order)"))
    if kueue is not None and kueue[0] <= kyverno[0] and kueue[1].get("reinvocationPolicy") != "IfNeeded":
        out.append(_fail(f"{check}/kueue", f"Kueue's pod webhook ({kueue[0]}) runs before Kyverno's and is not "
                         "called again: it never sees the queue label, GPU pods run without admission",
                         "install Kueue with mutatingWebhook.reinvocationPolicy: IfNeeded (the platform's values)"))
    return out or [_ok(check, f"Kyverno ({kyverno[0]}) mutates before HAMi"
                              + (f" ({hami[0]})" if hami else " (not installed)") + "; Kueue sees its labels")]


# Review 2, N3: the NVIDIA container toolkit hands a container the GPUs its NVIDIA_VISIBLE_DEVICES names, also to
# an unprivileged container that asked the device plugin for none, unless this option is off. Its default is on
# (NVIDIA/nvidia-container-toolkit, internal/config/config.go getDefaultConfig: AcceptEnvvarUnprivileged true; the
# installer's flag accept-nvidia-visible-devices-envvar-when-unprivileged reads this variable). CUDA base images set
# NVIDIA_VISIBLE_DEVICES=all in the image itself, where no admission policy sees it. The GPU operator passes
# `ClusterPolicy.spec.toolkit.env` to the toolkit installer.
GPU_OPERATOR_CRD = "clusterpolicies.nvidia.com"
CLUSTER_POLICIES = "/apis/nvidia.com/v1/clusterpolicies"
ENVVAR_WHEN_UNPRIVILEGED = "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED"
# urfave/cli reads a BoolFlag's variable with Go's strconv.ParseBool.
_GO_TRUE, _GO_FALSE = {"1", "t", "T", "TRUE", "true", "True"}, {"0", "f", "F", "FALSE", "false", "False"}


def check_device_envvar(read: Read) -> list[Finding]:
    """N3: no unprivileged container may pick GPUs by environment variable, or a pod without a GPU request (or
    with one GPU) on a GPU node uses every GPU there, other tenants' HAMi shares included, outside any quota."""
    check = "gpu-operator/device-envvar"
    fix = (f"set ClusterPolicy spec.toolkit.env {ENVVAR_WHEN_UNPRIVILEGED}=\"false\" (GPU operator Helm value "
           "toolkit.env), and on toolkits installed outside the operator accept-nvidia-visible-devices-envvar-"
           "when-unprivileged = false in /etc/nvidia-container-runtime/config.toml (docs/operator-guide.md)")
    if read(CRD_PATH + GPU_OPERATOR_CRD) is None:
        return [_ok(check, "no GPU operator on this cluster: the container toolkit is installed on the nodes and "
                           "cannot be read here; it must run with accept-nvidia-visible-devices-envvar-when-"
                           "unprivileged = false (a prerequisite, docs/operator-guide.md)")]
    out = []
    for policy in (read(CLUSTER_POLICIES) or {}).get("items", []):
        name = policy["metadata"]["name"]
        toolkit = (policy.get("spec") or {}).get("toolkit") or {}
        if toolkit.get("enabled") is False:
            out.append(_ok(f"{check}/{name}", "the toolkit is installed outside the GPU operator and cannot be "
                                               "read here; it must run with accept-nvidia-visible-devices-envvar-"
                                               "when-unprivileged = false (a prerequisite, docs/operator-guide.md)"))
            continue
        value = next((str(e.get("value", "")) for e in toolkit.get("env") or []
                      if e.get("name") == ENVVAR_WHEN_UNPRIVILEGED), None)
        if value in _GO_FALSE:
            out.append(_ok(f"{check}/{name}", f"{ENVVAR_WHEN_UNPRIVILEGED}={value}: unprivileged containers get "
                                               "only the GPUs the device plugin gave them"))
        else:
            said = "not set (default true)" if value is None else f"{value!r}" + (
                "" if value in _GO_TRUE else " (not a boolean: the installer fails or keeps true)")
            out.append(_fail(f"{check}/{name}", f"ClusterPolicy {name}: {ENVVAR_WHEN_UNPRIVILEGED} is {said}: any "
                             "unprivileged container with NVIDIA_VISIBLE_DEVICES=all (CUDA images set it) on a GPU "
                             "node gets every GPU of the node", fix))
    return out or [_ok(check, "GPU operator CRD installed but no ClusterPolicy: no toolkit is deployed by it")]
