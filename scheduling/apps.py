"""Scheduling: GPU models, flavors, quotas, cohorts, queues, inference endpoints, node pools.

No `ready()`: what this app adds to tenants' pipeline is declared in scheduling.contributions (the registry,
gpufleet.core.registry), and the catalog's data-version triggers are installed by migrations (ADR 0004).
"""
from django.apps import AppConfig


class SchedulingConfig(AppConfig):
    name = "scheduling"
    verbose_name = "GPU scheduling"
