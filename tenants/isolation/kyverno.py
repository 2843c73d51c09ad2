"""Per-tenant Kyverno Policy: pods that ask for GPU resources outside the tenant's modes are rejected.

The Kueue ClusterQueue only covers allowed flavors, but a pod can name any extended resource and
bypass Kueue (no queue label); admission is the place that cannot be bypassed.
"""

from __future__ import annotations

from infra.manifests import Manifest

from ..render import RenderContext, TenantView, metadata, tenant_section
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


@tenant_section("gpu-admission")
def render_gpu_admission(view: TenantView, ctx: RenderContext) -> list[Manifest]:
    return [gpu_policy(view, config.of_view(view).allowed_modes)]
