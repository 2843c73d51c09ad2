"""What the tenants app (and its isolation package) adds at the registry's extension points.

Orders: the foundation's sections 100-199, isolation's 200-299; the scheduling app's are 300-499
(scheduling.contributions), billing's 500+. See gpufleet.core.registry for what each point receives.
"""

from __future__ import annotations

from gpufleet.core.registry import Contribution

from . import render, syncer_gates
from .isolation import config, impact, kubeconfig, kyverno, network, nodes, vcluster

CONTRIBUTIONS: tuple[Contribution, ...] = (
    # The tenant's own objects: its host namespace and what bounds it, and its virtual cluster.
    Contribution("tenant_section", render.render_namespace, order=100, name="namespace"),
    Contribution("tenant_section", render.render_quota, order=110, name="resource-quota"),
    Contribution("tenant_section", render.render_limit_range, order=120, name="limit-range"),
    Contribution("tenant_section", render.render_vcluster, order=130, name="vcluster"),
    Contribution("platform_section", render.render_helm_repositories, order=100, name="helm-repositories"),
    # Isolation: GPU admission (Kyverno), network policies (Cilium), node isolation, the vCluster's OIDC/RBAC.
    Contribution("render_context", config.settings_extras, order=200),
    Contribution("view_loader", config.views_many, order=200, name="isolation"),
    Contribution("tenant_section", kyverno.render_gpu_admission, order=200, name="gpu-admission"),
    Contribution("tenant_section", network.render_network, order=210, name="network"),
    Contribution("tenant_section", nodes.render_node_isolation, order=220, name="node-isolation"),
    Contribution("tenant_section", vcluster.serving_ca_manifests, order=230, name="vcluster-serving-ca"),
    Contribution("platform_section", network.render_baseline, order=200, name="cilium-baseline"),
    Contribution("namespace_labels", kyverno.hami_webhook_scope, order=200),
    Contribution("vcluster_values", vcluster.extend_values, order=200),
    Contribution("condition", impact.gpu_modes_conditions_many, order=200),
    Contribution("condition", syncer_gates.gpu_workloads_conditions_many, order=210),  # issue 26, B3
    Contribution("kubeconfig_ca", kubeconfig.issued_ca, order=100),
)
