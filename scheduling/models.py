"""The scheduling app's models. Each domain keeps its own (scheduling.catalog.models, .quotas.models, ...);
this module imports them all so Django registers them under one app (label `scheduling`, one migration
history), and `from scheduling.models import Flavor` keeps working."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from scheduling.catalog.models import Flavor, GpuModel  # noqa: F401
from scheduling.clusters.models import (  # noqa: F401
    DEFAULT_CLUSTER,
    DEFAULT_CLUSTER_ID,
    Cluster,
    ClusterFlavor,
    Placement,
    PlacementChangeRequest,
    default_cluster_id,
)
from scheduling.clusters.sync_models import SyncRun  # noqa: F401
from scheduling.endpoints.models import InferenceEndpoint, SlaTier  # noqa: F401
from scheduling.nodepools.models import GpuNodePool  # noqa: F401
from scheduling.querysets import CatalogQuerySet, ScopedQuerySet  # noqa: F401
from scheduling.quotas.models import (  # noqa: F401
    Cohort,
    PriorityClass,
    Quota,
    QuotaChangeRequest,
    QuotaSimulation,
    TenantScheduling,
)


# A run of the portal's Simulate page. Its code (scheduling.simulation) sits above billing in the layers and
# billing imports this module, so the model lives here rather than beside that code.
class SimulationRun(models.Model):
    """A run asked for on the portal's Simulate page (a preset or an uploaded scenario); the worker
    (scheduling.run_simulation) fills in the outputs."""

    class State(models.TextChoices):
        PENDING = "pending"
        DONE = "done"
        FAILED = "failed"

    preset = models.CharField(max_length=40, blank=True)
    scenario = models.JSONField(default=dict, blank=True, help_text="the uploaded scenario, validated")
    endpoint = models.ForeignKey("InferenceEndpoint", null=True, blank=True, on_delete=models.CASCADE,
                                 related_name="+", help_text="set for an autoscaling plan of this endpoint")
    seed = models.IntegerField(default=0)
    days = models.FloatField(null=True, blank=True)
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING, db_index=True)
    result = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created = models.DateTimeField(auto_now_add=True)
    computed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return f"simulation run {self.pk} ({self.preset or 'scenario'}, {self.state})"
