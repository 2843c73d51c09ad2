"""Per-tenant Kyverno Policy: pods that ask for GPU resources outside the tenant's modes are rejected.

The Kueue ClusterQueue only covers allowed flavors, but a pod can name any extended resource and
bypass Kueue (no queue label); admission is the place that cannot be bypassed.
"""

from __future__ import annotations

from infra.manifests import Manifest

from ..render import RenderContext, TenantView, metadata
from . import config, policy

POLICY_NAME = "gpufleet-gpu-allocation-modes"
# Where a pod names extended resources. Kubernetes requires limits for extended resources; requests
# are checked too so a request-only spelling is not a way around the rule.
RESOURCE_KEYS = tuple(
    # keys() of `{}` for a container without resources: a function on null would be a rule error.
    f"{{{{ request.object.spec.{containers}[].keys(resources.{field} || `{{}}`)[] || `[]` }}}}"
    for containers in ("containers", "initContainers")
    for field in ("limits", "requests")
)


def gpu_policy(view: TenantView, allowed: frozenset[str]) -> Manifest:
    forbidden = policy.forbidden_resources(allowed)
    allowed_text = ", ".join(policy.order(allowed)) or "none"
    return {
        "apiVersion": "kyverno.io/v1",
        "kind": "Policy",
        "metadata": {
            **metadata(view, POLICY_NAME),
            "annotations": {
                "policies.kyverno.io/title": "GPU allocation modes by trust level",
                "gpufleet.io/allowed-modes": allowed_text,
            },
        },
        "spec": {
            # Background scans report existing pods that the current rule would reject (PolicyReports):
            # that is how a lowered trust level shows its now-inadmissible running workloads.
            "background": True,
            "rules": [
                {
                    "name": "gpu-allocation-modes",
                    "match": {"any": [{"resources": {"kinds": ["Pod"], "operations": ["CREATE", "UPDATE"]}}]},
                    "validate": {
                        "failureAction": "Enforce",
                        "message": (
                            f"tenant {view.slug} (trust level {view.trust_level}) may use GPU allocation "
                            f"modes: {allowed_text}; this pod asks for a GPU resource of another mode"
                        ),
                        "deny": {
                            "conditions": {
                                "any": [
                                    {"key": key, "operator": "AnyIn", "value": list(forbidden)}
                                    for key in RESOURCE_KEYS
                                ]
                            }
                        },
                    },
                }
            ],
        },
    }


# HAMi v2.10.0's webhook adds `nvidia.com/gpucores: 100` and `schedulerName: hami-scheduler` to any pod
# asking for `nvidia.com/gpu` (its default resourceName) in every namespace not labelled like this (the
# chart's MutatingWebhookConfiguration namespaceSelector, charts/hami/templates/scheduler/webhook.yaml);
# the GPU policy above would then reject the whole-GPU pods of tenants without HAMi.
HAMI_WEBHOOK_LABEL = ("hami.io/webhook", "ignore")


def hami_webhook_scope(view: TenantView, ctx: RenderContext) -> dict[str, str]:
    """Namespace labels (the registry's `namespace_labels`): HAMi's webhook ignores tenants that may
    not use HAMi."""
    if policy.HAMI in config.of_view(view).allowed_modes:
        return {}
    return dict([HAMI_WEBHOOK_LABEL])


def render_gpu_admission(view: TenantView, ctx: RenderContext) -> list[Manifest]:
    return [gpu_policy(view, config.of_view(view).allowed_modes)]
