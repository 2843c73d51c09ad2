from django.apps import AppConfig
from django.db.models.signals import post_migrate


class ApiConfig(AppConfig):
    name = "gpufleet.api"
    label = "gpufleet_api"
    verbose_name = "REST API"

    def ready(self) -> None:
        from . import schema  # noqa: F401  (registers the OpenAPI extension for API tokens)
        from .dataversion import install_triggers

        # After every migrate (and flush): tables added by any app's later migration get the data-version
        # trigger too, so the answer cache can never miss their writes.
        post_migrate.connect(install_triggers, sender=self, dispatch_uid="gpufleet_data_version_triggers")
