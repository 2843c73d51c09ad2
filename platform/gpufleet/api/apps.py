from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "gpufleet.api"
    label = "gpufleet_api"
    verbose_name = "REST API"
