"""Scheduling: GPU models, flavors, quotas, cohorts, queues, inference endpoints, node pools."""
from django.apps import AppConfig


class SchedulingConfig(AppConfig):
    name = "scheduling"
    verbose_name = "GPU scheduling"

    def ready(self) -> None:
        # What this app adds to tenants' pipeline is declared in scheduling.contributions (the registry).
        from django.db.models.signals import post_migrate

        from . import catalog_revision

        # After every migrate: a database migrated back past the revision table, or restored, gets them again.
        post_migrate.connect(catalog_revision.after_migrate, sender=self, dispatch_uid="gpufleet-catalog-revision")
