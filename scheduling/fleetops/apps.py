from django.apps import AppConfig


class FleetOpsConfig(AppConfig):
    name = "scheduling.fleetops"
    label = "fleetops"
    verbose_name = "Fleet operations"
