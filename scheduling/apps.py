"""Scheduling: GPU models, flavors, quotas, cohorts, queues, inference endpoints, node pools."""
from django.apps import AppConfig


class SchedulingConfig(AppConfig):
    name = "scheduling"
    verbose_name = "GPU scheduling"

    def ready(self) -> None:
        from tenants import reconcile
        from tenants import render as tenant_render

        from . import inputs, prerequisites, render  # noqa: F401  (registers the render sections)

        if inputs.load_tenant not in reconcile.VIEW_EXTRAS:
            reconcile.VIEW_EXTRAS.append(inputs.load_tenant)
        if inputs.load_catalog not in tenant_render.CONTEXT_EXTRAS:
            tenant_render.CONTEXT_EXTRAS.append(inputs.load_catalog)
        from .endpoints import replicate_services

        if replicate_services not in tenant_render.VCLUSTER_VALUES_HOOKS:
            tenant_render.VCLUSTER_VALUES_HOOKS.append(replicate_services)
        from . import inputs_many  # batch loaders for fleet-wide passes (gitops-sync)

        inputs_many.register()
        from tenants import actions as tenant_actions

        from .placement_actions import place_new_tenant

        if place_new_tenant not in tenant_actions.ON_REQUEST:
            tenant_actions.ON_REQUEST.append(place_new_tenant)
        from . import delivery

        if not tenant_render.PLACEMENT_HOOKS:
            tenant_render.PLACEMENT_HOOKS.append(delivery.placed_for_tenant)
            tenant_render.PLATFORM_TARGET_HOOKS.append(delivery.platform_targets)
        if delivery.record_placement not in reconcile.PLACEMENT_STATUS_HOOKS:
            reconcile.PLACEMENT_STATUS_HOOKS.append(delivery.record_placement)
            reconcile.PLATFORM_STATUS_HOOKS.append(delivery.record_platform)
        if delivery.placement_chunk not in reconcile.CHUNK_SCOPES:
            reconcile.CHUNK_SCOPES.append(delivery.placement_chunk)
        from tenants.isolation import kubeconfig

        if delivery.kubeconfig_placements not in kubeconfig.PLACEMENT_PROVIDERS:
            kubeconfig.PLACEMENT_PROVIDERS.append(delivery.kubeconfig_placements)
        if delivery.reserved_pools_values not in tenant_render.VCLUSTER_VALUES_HOOKS:
            tenant_render.VCLUSTER_VALUES_HOOKS.append(delivery.reserved_pools_values)
        from tenants import backends

        if delivery.kube_clusters not in backends.KUBE_CLUSTER_HOOKS:
            backends.KUBE_CLUSTER_HOOKS.append(delivery.kube_clusters)
        from . import multikueue_render  # MultiKueue mode: wraps the placement hook registered above

        multikueue_render.register()
        from django.db.models.signals import post_migrate

        from . import (
            catalog_revision,
            demo,  # noqa: F401  (registers the demo fleet's catalog seeder)
        )

        # After every migrate: a database migrated back past the revision table, or restored, gets them again.
        post_migrate.connect(catalog_revision.after_migrate, sender=self, dispatch_uid="gpufleet-catalog-revision")
