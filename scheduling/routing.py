"""Per-tenant Kyverno policies that route a tenant's host pods: which Kueue queue, which KAI queue, which
scheduler, which GPU mode's flavors and nodes (`gpufleet.io/gpu-mode`), which priority classes. Pure;
rendered by scheduling.render for tenants with scheduling data.

Why in the host namespace and not inside the virtual cluster: the tenant is cluster-admin of its vCluster
and writes every virtual pod; what the syncer copies to the host is tenant-controlled. A mutate rule in
`tenant-<slug>` on the host overwrites what must not be the tenant's choice (its KAI queue, its GPU mode's
node label), and adds the Kueue queue label only to GPU pods, so the platform's own pods (the vCluster
control plane, the synced CoreDNS) never enter Kueue (Kueue runs with manageJobsWithoutQueueName: false).

Kyverno v1.19.0 semantics used (config/crds/kyverno/kyverno.io_policies.yaml and the docs at that tag):
`preconditions.any/all` with JMESPath keys, operators AnyIn / AllNotIn / AnyNotIn with `*` wildcards,
`mutate.patchStrategicMerge` (a map -- labels, nodeSelector -- merges key by key, a scalar field is replaced).
"""

from __future__ import annotations

from typing import Any

from gpufleet.core import sharing
from infra.manifests import Manifest
from scheduling.nodepools.render import MODE_LABEL
from tenants.render import TenantView, metadata

ROUTING_POLICY = "gpufleet-gpu-routing"
PRIORITY_POLICY = "gpufleet-priority-classes"
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
KAI_QUEUE_LABEL = "kai.scheduler/queue"
KAI_SCHEDULER = sharing.KAI_SCHEDULER

# Every extended resource name a pod asks for, in containers and init containers, limits and requests,
# flattened into one list (a container without resources contributes nothing, never a null).
_PARTS = [
    f"request.object.spec.{containers}[].keys(resources.{field} || `{{}}`)[] || `[]`"
    for containers in ("containers", "initContainers")
    for field in ("limits", "requests")
]
ALL_RESOURCES = "{{ [" + ", ".join(_PARTS) + "][] }}"
GPU_PATTERNS = [p for mode in sharing.MODES for p in mode.resource_patterns]
# Pods asking for a KAI-scheduled mode's resources and none of another scheduler's get KAI.
KAI_PATTERNS = [p for mode in sharing.scheduled_by(KAI_SCHEDULER) for p in mode.resource_patterns]
HAMI_PATTERNS = [p for mode in sharing.MODES if mode.scheduler != KAI_SCHEDULER for p in mode.resource_patterns]


def _pod_create() -> dict[str, Any]:
    return {"any": [{"resources": {"kinds": ["Pod"], "operations": ["CREATE"]}}]}


def gpu_mode_rules() -> list[dict[str, Any]]:
    """`nodeSelector: {gpufleet.io/gpu-mode: <mode>}` on every GPU pod, the mode decided by what it asks for:
    any HAMi share resource (`gpucores`, `gpumem`, `gpumem-percentage`) -> hami, else any `nvidia.com/mig-*`
    -> mig, else `nvidia.com/gpu` -> whole. One rule per mode (a rule has one mutation).

    Why (issue 26, F3): whole GPUs and HAMi vGPUs are both `nvidia.com/gpu`, so a HAMi tenant's whole and HAMi
    flavors share one Kueue resource group, and with flavor fungibility Kueue moves on to the next flavor when
    one is full (kubernetes-sigs/kueue@v0.19.2:pkg/scheduler/flavorassigner/flavorassigner.go:1259-1271): a
    whole-GPU pod beyond its whole quota fit the HAMi flavor's `nvidia.com/gpu`, and a HAMi pod asking for
    `gpumem` (undeclared, ignored under IgnoreUndeclared) fit the whole flavor. Kueue skips a flavor whose
    nodeLabels do not match the pod's nodeSelector on the keys the flavor defines (flavorassigner.go:1227,
    1246-1253); every GPU ResourceFlavor and every GPU pool's nodes carry this label (scheduling.nodepools),
    so a pod is only ever admitted on a flavor of its own mode. The value overwrites whatever the tenant
    wrote under that key (a strategic merge of a map replaces the key's value).

    A plain `nvidia.com/gpu` pod is whole even for a tenant allowed HAMi: HAMi would make any such pod a vGPU
    pod on its nodes (an exclusive card, `gpucores: 100`), but the rule above names kai-scheduler for it, which
    HAMi's webhook leaves alone, and this label keeps it off HAMi's nodes. A tenant asks for a share by
    naming a share resource. A pod mixing modes (MIG with `nvidia.com/gpu`, a share with a MIG slice) gets
    one mode and no flavor of the other matches: Kueue refuses it, as no node offers both."""
    none_of = {"key": ALL_RESOURCES, "operator": "AllNotIn"}
    # A later mode of the registry wins over the earlier ones (sharing.MODES): its rule comes first, and
    # each earlier mode's rule requires none of the later modes' resources (in registry order).
    ranked = list(reversed(sharing.MODES))
    cases = [(mode.name, [{"key": ALL_RESOURCES, "operator": "AnyIn", "value": list(mode.resource_patterns)},
                          *({**none_of, "value": list(later.resource_patterns)} for later in reversed(ranked[:i]))])
             for i, mode in enumerate(ranked)]
    return [{"name": f"{mode}-gpu-pods-select-{mode}-nodes", "match": _pod_create(),
             "preconditions": {"all": conditions},
             "mutate": {"patchStrategicMerge": {"spec": {"nodeSelector": {MODE_LABEL: mode}}}}}
            for mode, conditions in cases]


# The pod annotations that ask Kueue for topology-aware placement (kubernetes-sigs/kueue@v0.19.2:
# apis/kueue/v1beta2/topology_types.go). No ResourceFlavor is topology-aware (docs/compatibility.md, B1).
KUEUE_TOPOLOGY_ANNOTATIONS = ("kueue.x-k8s.io/podset-required-topology",
                              "kueue.x-k8s.io/podset-preferred-topology",
                              "kueue.x-k8s.io/podset-unconstrained-topology")
TOPOLOGY_REFUSAL = ("Kueue topology-aware placement is not offered by this platform (no GPU flavor is "
                    "topology-aware; docs/compatibility.md, B1): Kueue would hold this pod forever. Remove the "
                    "kueue.x-k8s.io/podset-*-topology annotations; each GPU node pool is one placement domain.")


def kueue_topology_refusal() -> dict[str, Any]:
    """Refuse a pod that asks Kueue for topology at creation, with the reason. Every tenant ClusterQueue holds
    the non-TAS `gpufleet-host` flavor for cpu/memory, so Kueue would answer such a pod with "Flavor
    gpufleet-host does not support TopologyAwareScheduling" and keep it pending for ever
    (kubernetes-sigs/kueue@v0.19.2:pkg/scheduler/flavorassigner/tas_flavorassigner.go:175-182): a refusal
    the tenant sees at `kubectl apply` (or as the syncer's event) beats a pod that never starts."""
    present = [{"key": f"{{{{ request.object.metadata.annotations.\"{name}\" || '' }}}}",
                "operator": "AnyNotIn", "value": [""]} for name in KUEUE_TOPOLOGY_ANNOTATIONS]
    return {"name": "no-kueue-topology-requests", "match": _pod_create(),
            "validate": {"failureAction": "Enforce", "message": TOPOLOGY_REFUSAL,
                         "deny": {"conditions": {"any": present}}}}


def routing_policy(view: TenantView, local_queue: str) -> Manifest:
    kai_queue = view.namespace  # KAI Queue and Kueue ClusterQueue are both named tenant-<slug>
    rules = [
        {
            # GPU pods (any mode) queue in Kueue; nothing else does.
            "name": "gpu-pods-queue-in-kueue",
            "match": _pod_create(),
            "preconditions": {"all": [{"key": ALL_RESOURCES, "operator": "AnyIn", "value": GPU_PATTERNS}]},
            "mutate": {"patchStrategicMerge": {"metadata": {"labels": {KUEUE_QUEUE_LABEL: local_queue}}}},
        },
        {
            # The KAI queue is the namespace's, whatever the tenant wrote (it could name another
            # tenant's queue otherwise). Harmless on pods KAI does not schedule.
            "name": "kai-queue-is-the-tenants",
            "match": _pod_create(),
            "mutate": {"patchStrategicMerge": {"metadata": {"labels": {KAI_QUEUE_LABEL: kai_queue}}}},
        },
        {
            # Whole-GPU and MIG pods are bound by KAI. Setting the scheduler also keeps HAMi's webhook
            # away (it skips pods that name another scheduler, pkg/scheduler/webhook.go v2.10.0), so a
            # whole GPU is never turned into a HAMi share. HAMi pods keep hami-scheduler.
            "name": "-and-".join(m.name for m in sharing.scheduled_by(KAI_SCHEDULER)) + "-pods-use-kai",
            "match": _pod_create(),
            "preconditions": {"all": [
                {"key": ALL_RESOURCES, "operator": "AnyIn", "value": KAI_PATTERNS},
                {"key": ALL_RESOURCES, "operator": "AllNotIn", "value": HAMI_PATTERNS},
            ]},
            "mutate": {"patchStrategicMerge": {"spec": {"schedulerName": KAI_SCHEDULER}}},
        },
        *gpu_mode_rules(),
        kueue_topology_refusal(),
    ]
    return {
        "apiVersion": "kyverno.io/v1",
        "kind": "Policy",
        "metadata": {**metadata(view, ROUTING_POLICY),
                     "annotations": {"policies.kyverno.io/title":
                                         "GPU pods: Kueue queue, KAI queue, scheduler, GPU mode"}},
        "spec": {"background": False, "rules": rules},
    }


def priority_policy(view: TenantView, allowed: list[str]) -> Manifest:
    """Pods may name only the WorkloadPriorityClasses the tenant is entitled to (or none)."""
    allowed_text = ", ".join(allowed) or "none"
    return {
        "apiVersion": "kyverno.io/v1",
        "kind": "Policy",
        "metadata": {**metadata(view, PRIORITY_POLICY),
                     "annotations": {"policies.kyverno.io/title": "Kueue priority classes by tenant"}},
        "spec": {
            "background": True,
            "rules": [{
                "name": "priority-class-entitlement",
                "match": {"any": [{"resources": {"kinds": ["Pod"], "operations": ["CREATE", "UPDATE"]}}]},
                "validate": {
                    "failureAction": "Enforce",
                    "message": (f"tenant {view.slug} may use priority classes: {allowed_text}; "
                                f"this pod's {KUEUE_PRIORITY_LABEL} label names another"),
                    "deny": {"conditions": {"any": [{
                        "key": f"{{{{ request.object.metadata.labels.\"{KUEUE_PRIORITY_LABEL}\" || '' }}}}",
                        "operator": "AnyNotIn",
                        "value": [*allowed, ""],
                    }]}},
                },
            }],
        },
    }


SYNCER_GATE_POLICY = "gpufleet-gpu-syncer-gates"
# Set by vCluster's syncer on every pod it creates on the host (loft-sh/vcluster@v0.36.1:pkg/util/translate/
# types.go:21, NamespaceLabel); the platform's own serving Deployments in the namespace never carry it.
SYNCED_POD_LABEL = "vcluster.loft.sh/namespace"


def syncer_gate_policy(view: TenantView, message: str) -> Manifest:
    """Refuse synced GPU pods while the vCluster syncer strips Kueue's gates (tenants.syncer_gates): Kueue would
    delete them, or one bound before Kueue saw it would run outside quota. Loud, at creation, with the reason,
    instead of a pod that vanishes."""
    synced = f"{{{{ request.object.metadata.labels.\"{SYNCED_POD_LABEL}\" || '' }}}}"
    return {
        "apiVersion": "kyverno.io/v1",
        "kind": "Policy",
        "metadata": {**metadata(view, SYNCER_GATE_POLICY),
                     "annotations": {"policies.kyverno.io/title": "GPU pods need a syncer that keeps Kueue's gates"}},
        "spec": {
            "background": False,
            "rules": [{
                "name": "gpu-pods-need-kueue-gates",
                "match": _pod_create(),
                "validate": {
                    "failureAction": "Enforce",
                    "message": message,
                    "deny": {"conditions": {"all": [
                        {"key": ALL_RESOURCES, "operator": "AnyIn", "value": GPU_PATTERNS},
                        {"key": synced, "operator": "AnyNotIn", "value": [""]},
                    ]}},
                },
            }],
        },
    }
