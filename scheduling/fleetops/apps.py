from django.apps import AppConfig


class FleetOpsConfig(AppConfig):
    name = "scheduling.fleetops"
    label = "fleetops"
    verbose_name = "Fleet operations"

    def ready(self) -> None:
        from tenants import render as tenant_render

        from . import render  # noqa: F401  (registers the capacity-rules platform section)
        from .service import render_inputs

        if render_inputs not in tenant_render.CONTEXT_EXTRAS:
            tenant_render.CONTEXT_EXTRAS.append(render_inputs)
