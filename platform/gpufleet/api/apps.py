from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "gpufleet.api"
    label = "gpufleet_api"
    verbose_name = "REST API"

    def ready(self) -> None:
        from . import schema  # noqa: F401  (registers the OpenAPI extension for API tokens)
