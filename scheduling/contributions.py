"""What the scheduling app adds at the registry's extension points (gpufleet.core.registry).

Orders 300-399; MultiKueue's 400-499 (it renders after, and wraps, the plain placements). Tenants' and
isolation's own are 100-299 (tenants.contributions).
"""

from __future__ import annotations

from gpufleet.core.registry import Contribution
from scheduling.catalog import demo
from scheduling.clusters import delivery, multikueue_render
from scheduling.clusters.placement_actions import place_new_tenant
from scheduling.endpoints import render as endpoints

from . import inputs, inputs_many, prerequisites, render

CONTRIBUTIONS: tuple[Contribution, ...] = (
    # Render inputs: the GPU catalog (platform-wide) and each tenant's quotas, endpoints and placements.
    Contribution("render_context", inputs.load_catalog, order=300),
    Contribution("view_loader", inputs_many.scheduling_many, order=300, name="scheduling"),
    Contribution("tenant_section", render.render_tenant_scheduling, order=300, name="scheduling"),
    Contribution("platform_section", prerequisites.render_prerequisites, order=300, name="prerequisites"),
    Contribution("platform_section", render.render_platform_scheduling, order=310, name="scheduling"),
    Contribution("quota_hard", render.gpu_quota_keys, order=300),
    Contribution("vcluster_values", endpoints.replicate_services, order=300),
    Contribution("vcluster_values", delivery.reserved_pools_values, order=310),
    # Host clusters: where a tenant's and the platform's objects go, and how delivering there went.
    Contribution("placements", delivery.placed_for_tenant, order=300),
    Contribution("platform_targets", delivery.platform_targets, order=300),
    Contribution("placement_status", delivery.record_placement, order=300),
    Contribution("platform_status", delivery.record_platform, order=300),
    Contribution("chunk_scope", delivery.placement_chunk, order=300),
    Contribution("kube_clusters", delivery.kube_clusters, order=300),
    Contribution("kubeconfig_placements", delivery.kubeconfig_placements, order=300),
    Contribution("on_request", place_new_tenant, order=300),  # the new tenant's home placement
    # MultiKueue mode (off by default): its switch, the dispatch role of each placement, its objects.
    Contribution("render_context", multikueue_render.context_extras, order=400),
    Contribution("placement_wrappers", multikueue_render.wrap, order=400),
    Contribution("tenant_section", multikueue_render.render_tenant_multikueue, order=400, name="multikueue"),
    Contribution("demo_seeder", demo.seed_catalog, order=300),
    Contribution("demo_seeder", demo.seed_clusters, order=310),
)
