from django.apps import AppConfig


class FleetOpsConfig(AppConfig):
    """What fleet operations add to the platform's render is declared in scheduling.fleetops.contributions."""

    name = "scheduling.fleetops"
    label = "fleetops"
    verbose_name = "Fleet operations"
