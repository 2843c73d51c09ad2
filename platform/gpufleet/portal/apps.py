from django.apps import AppConfig


class PortalConfig(AppConfig):
    name = "gpufleet.portal"
    label = "portal"
    verbose_name = "Self-service portal"
