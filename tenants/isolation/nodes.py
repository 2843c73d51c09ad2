"""Per-tenant Kyverno Policy: a tenant's pods choose no nodes that are not theirs (review 2, N3).

Why it is needed: vCluster copies a virtual pod's nodeSelector, affinity and tolerations to the host pod
(loft-sh/vcluster@v0.36.1:pkg/controllers/resources/pods/translate/translator.go:438-451, diff.go:165-172)
and forces a node selector only when `sync.fromHost.nodes.selector` is set (syncer.go:212-221), which only
dedicated (untrusted) tenants have (tenants.isolation.vcluster). Taints are what keep pods off nodes, so a
pod that tolerates another tenant's `gpufleet.io/dedicated-tenant` taint lands on (or makes Karpenter launch)
that tenant's nodes, and a pod without a GPU request that tolerates `nvidia.com/gpu` lands on GPU nodes
outside Kueue and the GPU ResourceQuota. Those tolerations and node choices are refused at creation.

Why here and not in scheduling.routing: node isolation is a tenant-isolation guarantee, owed by every
tenant namespace, also one without scheduling data (scheduling's section renders nothing for it), and it
sits beside the GPU allocation-mode policy (tenants.isolation.kyverno) that shares its resource expression.

What a tenant's legitimate pods carry and keep passing: a dedicated tenant's synced pods get exactly
`gpufleet.io/dedicated-tenant=<slug>:NoSchedule` (Equal) and that nodeSelector from its vCluster
(`enforceTolerations`, `fromHost.nodes.selector`), as its platform-owned vLLM Deployments do
(scheduling.render.endpoint_manifests); GPU pods get their GPU node choices from Kueue's flavor at
admission (an UPDATE, not checked) and from the routing policy's mutation (`gpufleet.io/gpu-mode`), and
their devices from the device plugin, never from an environment variable.

Kyverno v1.19.0 semantics used: `deny.conditions` with JMESPath keys (standard functions `length`,
`keys`, `starts_with`, `sum`, filters), operators AnyIn (a list key against a list value), Equals and
GreaterThan on numbers (pkg/engine/variables/operator/{anyin,equal,numeric}.go).
"""

from __future__ import annotations

from typing import Any

from infra.manifests import Manifest

from ..render import RenderContext, TenantView, metadata
from . import config, policy

POLICY_NAME = "gpufleet-node-isolation"
# The env var the NVIDIA container toolkit reads to pick devices. Under the toolkit's default
# (accept-nvidia-visible-devices-envvar-when-unprivileged = true) `all` hands an unprivileged container every
# GPU of its node, other tenants' HAMi shares included; the device plugin sets it for the devices it gave.
DEVICE_ENV_VARS = ("NVIDIA_VISIBLE_DEVICES",)

_SPEC = "request.object.spec"
_REQUIRED_TERMS = f"{_SPEC}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"


def _count(expression: str) -> str:
    """`{{ … }}` counting what `expression` yields, 0 for null (a pod without the field)."""
    return f"{{{{ length({expression} || `[]`) }}}}"


def _required_expressions(condition: str) -> str:
    """The required node-affinity match expressions (every term) that satisfy a JMESPath filter condition."""
    return f"({_REQUIRED_TERMS}[].matchExpressions[] || `[]`)[?{condition}]"


def _gpu_resource_filter() -> str:
    """A filter keeping a pod's GPU resource names: every pattern of every mode (`*` only as a suffix)."""
    tests = []
    for pattern in (p for mode in policy.MODES for p in policy.MODE_RESOURCES[mode]):
        tests.append(f"starts_with(@, '{pattern[:-1]}')" if pattern.endswith("*") else f"@ == '{pattern}'")
    return " || ".join(tests)


# Every resource name a pod asks for, containers and init containers, limits and requests, flattened; in
# parentheses, so that a filter after it filters the list (after a bare `[]` it would act on each element).
_ALL_RESOURCES = "([" + ", ".join(
    f"{_SPEC}.{containers}[].keys(resources.{field} || `{{}}`)[] || `[]`"
    for containers in ("containers", "initContainers") for field in ("limits", "requests")) + "][])"
GPU_RESOURCE_COUNT = f"{{{{ length({_ALL_RESOURCES}[?{_gpu_resource_filter()}]) }}}}"


# Tolerations may be added to a running pod, and nodeSelector/affinity to a gated one (Kubernetes allows both by
# UPDATE), and vCluster copies the virtual pod's to the host pod on every sync (loft-sh/vcluster@v0.36.1:pkg/
# controllers/resources/pods/translate/diff.go:137,165-180): the node-choice rules also see UPDATE (review 2,
# re-check of N3). Kueue's own UPDATE at admission adds its flavor's tolerations to GPU pods only, which these
# rules allow. The env and nodeName rules stay CREATE-only: env is immutable, and every scheduled pod carries
# the nodeName the scheduler bound it to, so judging later UPDATEs on it would refuse Kueue's finalizer removal.
CREATE = ["CREATE"]
CREATE_AND_UPDATE = ["CREATE", "UPDATE"]


def _deny(name: str, message: str, conditions: dict[str, list[dict[str, Any]]],
          operations: list[str] = CREATE) -> dict[str, Any]:
    return {"name": name, "match": {"any": [{"resources": {"kinds": ["Pod"], "operations": list(operations)}}]},
            "validate": {"failureAction": "Enforce", "message": message, "deny": {"conditions": conditions}}}


def _more_than_none(expression: str) -> dict[str, Any]:
    return {"key": _count(expression), "operator": "GreaterThan", "value": 0}


def dedicated_rules(slug: str, own: str) -> list[dict[str, Any]]:
    """`own`: the tenant's own dedicated-node value (its slug) if it has dedicated nodes, else empty."""
    key = policy.DEDICATED_POOL_LABEL
    own_toleration = f" && !((operator || 'Equal') == 'Equal' && value == '{own}')" if own else ""
    # `Exists` names every tenant's nodes; `In` with any value but the tenant's own names another's.
    own_values = f"values[?@ != '{own}']" if own else "values"
    foreign_choice = f"key == '{key}' && (operator == 'Exists' || operator == 'In' && {own_values})"
    allowed = f"only {key}={own} (your own nodes, which the platform adds itself)" if own else "none"
    return [
        _deny("no-foreign-dedicated-tolerations",
              f"spec.tolerations: tenant {slug} may not tolerate the {key} taint of another tenant's dedicated "
              f"nodes, nor every taint (a toleration without a key): those nodes are reserved for that tenant "
              f"(allowed: {allowed})",
              {"any": [_more_than_none(f"{_SPEC}.tolerations[?key == '{key}'{own_toleration}]"),
                       _more_than_none(f"{_SPEC}.tolerations[?!key]")]}, CREATE_AND_UPDATE),
        _deny("no-foreign-dedicated-nodes",
              f"spec.nodeSelector / spec.affinity.nodeAffinity: tenant {slug} may not select {key} nodes of "
              f"another tenant: those nodes are reserved for that tenant (allowed: {allowed})",
              {"any": [{"key": f"{{{{ {_SPEC}.nodeSelector.\"{key}\" || '' }}}}", "operator": "AnyNotIn",
                        "value": ["", *([own] if own else [])]},
                       _more_than_none(_required_expressions(foreign_choice))]}, CREATE_AND_UPDATE),
    ]


def gpu_node_rule() -> dict[str, Any]:
    labels = (policy.GPU_MODE_LABEL, policy.GPU_FLAVOR_LABEL)
    label_test = " || ".join(f"@ == '{label}'" for label in labels)
    key_test = " || ".join(f"key == '{label}'" for label in labels)
    return _deny(
        "gpu-nodes-need-a-gpu-request",
        f"spec.tolerations / spec.nodeSelector / spec.affinity.nodeAffinity: a pod that requests no GPU resource "
        f"may not tolerate the {policy.GPU_TAINT_KEY} taint nor select {' or '.join(labels)} nodes: GPU nodes "
        f"are for pods that Kueue admits against the tenant's GPU quota; request a GPU, or drop the toleration "
        f"and node choice",
        {"all": [
            {"key": GPU_RESOURCE_COUNT, "operator": "Equals", "value": 0},
            # JMESPath has no `+`; sum() of the three counts.
            {"key": (f"{{{{ sum([length({_SPEC}.tolerations[?key == '{policy.GPU_TAINT_KEY}'] || `[]`), "
                     f"length(keys({_SPEC}.nodeSelector || `{{}}`)[?{label_test}]), "
                     f"length({_required_expressions(key_test)})]) }}}}"),
             "operator": "GreaterThan", "value": 0},
        ]}, CREATE_AND_UPDATE)


def device_env_rule() -> dict[str, Any]:
    names = ", ".join(DEVICE_ENV_VARS)
    return _deny(
        "no-gpu-device-env",
        f"spec.containers[].env / spec.initContainers[].env: {names} may not be set by the tenant: the container "
        f"toolkit would hand the container the GPUs it names (\"all\": every GPU of the node, other tenants' "
        f"included); a GPU pod gets its devices from the device plugin by requesting a GPU resource",
        {"any": [{"key": (f"{{{{ [{_SPEC}.containers[].env[].name || `[]`, "
                          f"{_SPEC}.initContainers[].env[].name || `[]`][] }}}}"),
                  "operator": "AnyIn", "value": list(DEVICE_ENV_VARS)}]})


def node_name_rule() -> dict[str, Any]:
    """A pod created with `spec.nodeName` is bound without the scheduler, so no NoSchedule taint applies to it
    (Kubernetes docs, "Taints and Tolerations"): it would reach any node by name. The scheduler binds through the
    `pods/binding` subresource and DaemonSets use node affinity, so none of the platform's pods is created so."""
    return _deny(
        "no-node-name",
        "spec.nodeName: a tenant's pod may not name its node: that skips the scheduler and every taint that keeps "
        "pods off other tenants' and GPU nodes; use resources (and, on your own nodes, nodeSelector) instead",
        {"any": [{"key": f"{{{{ {_SPEC}.nodeName || '' }}}}", "operator": "AnyNotIn", "value": [""]}]})


def node_isolation_policy(view: TenantView) -> Manifest:
    own = config.of_view(view).placement.node_selector.get(policy.DEDICATED_POOL_LABEL, "")
    return {
        "apiVersion": "kyverno.io/v1",
        "kind": "Policy",
        "metadata": {**metadata(view, POLICY_NAME),
                     "annotations": {"policies.kyverno.io/title": "Tenant pods choose only their own nodes"}},
        # Node choices at CREATE and UPDATE, env and nodeName at CREATE (see CREATE_AND_UPDATE above).
        "spec": {"background": False,
                 "rules": [*dedicated_rules(view.slug, own), gpu_node_rule(), device_env_rule(),
                           node_name_rule()]},
    }


def render_node_isolation(view: TenantView, ctx: RenderContext) -> list[Manifest]:
    return [node_isolation_policy(view)]
