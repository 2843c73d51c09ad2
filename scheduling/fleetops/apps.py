from django.apps import AppConfig


class FleetOpsConfig(AppConfig):
    name = "scheduling.fleetops"
    label = "fleetops"
    verbose_name = "Fleet operations"

    def ready(self) -> None:
        from tenants import render as tenant_render

        from . import render  # noqa: F401  (registers the capacity-rules platform section)
        from .service import render_inputs

        # Only the platform's capacity rules read it (every tenant's ClusterQueue): not loaded per tenant.
        if render_inputs not in tenant_render.PLATFORM_CONTEXT_EXTRAS:
            tenant_render.PLATFORM_CONTEXT_EXTRAS.append(render_inputs)
