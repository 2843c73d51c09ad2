"""GPU node pools: the Karpenter NodePools platform admins define per flavor."""

from __future__ import annotations

from django.db import models

from scheduling.catalog.models import Flavor
from scheduling.clusters.models import (
    DEFAULT_CLUSTER_ID,
    default_cluster_id,
)
from scheduling.querysets import CatalogQuerySet


class GpuNodePool(models.Model):
    """A Karpenter NodePool of GPU nodes. Its GPU limit also counts as fleet capacity of its flavor."""

    class Consolidation(models.TextChoices):
        WHEN_EMPTY = "WhenEmpty"
        WHEN_EMPTY_OR_UNDERUTILIZED = "WhenEmptyOrUnderutilized"

    name = models.CharField(max_length=63, unique=True)
    flavor = models.ForeignKey(Flavor, on_delete=models.PROTECT, related_name="node_pools")
    # The host cluster whose Karpenter runs this pool.
    cluster = models.ForeignKey(
        "scheduling.Cluster", on_delete=models.PROTECT, related_name="node_pools", default=default_cluster_id,
        db_default=DEFAULT_CLUSTER_ID,
    )
    # Tenant trust levels whose pods may land on this pool's nodes; empty = every level the cluster allows.
    trust_levels = models.JSONField(default=list, blank=True, db_default=[])
    instance_types = models.JSONField(default=list, blank=True)
    capacity_types = models.JSONField(default=list, blank=True)
    # Whole GPUs the pool may grow to (NodePool spec.limits["nvidia.com/gpu"]).
    gpu_limit = models.PositiveIntegerField()
    # GPUs on each node of the pool's instance types (8 on p5/p4d/a3): sizes the NodeOverlay that tells
    # Karpenter how many MIG slices / HAMi shares a node offers (scheduling.nodepools).
    gpus_per_node = models.PositiveSmallIntegerField(default=8, db_default=8)
    node_class = models.CharField(max_length=63, default="gpu")
    consolidation_policy = models.CharField(
        max_length=30, choices=Consolidation.choices, default=Consolidation.WHEN_EMPTY
    )
    consolidate_after = models.CharField(max_length=20, default="1h")
    # Underutilized consolidation evicts live inference; it needs this explicit, audited override.
    allow_underutilized = models.BooleanField(default=False)
    created = models.DateTimeField(auto_now_add=True)

    objects = CatalogQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def warnings(self) -> list[str]:
        if self.consolidation_policy == self.Consolidation.WHEN_EMPTY_OR_UNDERUTILIZED:
            return [
                f"node pool {self.name}: consolidationPolicy WhenEmptyOrUnderutilized lets Karpenter evict "
                "running GPU pods (live inference, training without checkpoints) to pack nodes"
            ]
        return []
