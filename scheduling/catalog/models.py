"""The GPU catalog: GPU models and flavors (whole GPUs, MIG instances, HAMi shares)."""

from __future__ import annotations

from decimal import Decimal

from django.db import models

from gpufleet.core import sharing
from scheduling.catalog import rules as catalog
from scheduling.querysets import CatalogQuerySet


class GpuModel(models.Model):
    name = models.CharField(max_length=63, unique=True, help_text="short name, e.g. a100-80gb")
    # What dcgm-exporter reports in its `modelName` label, e.g. "NVIDIA A100-SXM4-80GB".
    dcgm_model_name = models.CharField(max_length=200)
    memory_mib = models.PositiveIntegerField()
    # Value of the node label `nvidia.com/gpu.product` on nodes with this GPU.
    node_label_value = models.CharField(max_length=200, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    objects = CatalogQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Flavor(models.Model):
    name = models.CharField(max_length=63, unique=True)
    gpu_model = models.ForeignKey(GpuModel, on_delete=models.PROTECT, related_name="flavors")
    # The sharing-mode registry's modes (a new one changes the choices: makemigrations records it).
    mode = models.CharField(max_length=10, choices=sharing.choices())
    mig_profile = models.CharField(max_length=20, blank=True)
    memory_percent = models.PositiveSmallIntegerField(null=True, blank=True)
    cores_percent = models.PositiveSmallIntegerField(null=True, blank=True)
    # GPU-equivalents of one unit of this flavor (capacity and billing); see catalog.default_weight.
    weight = models.DecimalField(max_digits=8, decimal_places=4, default=Decimal(1))
    # Units of this flavor the fleet offers (GPUs, MIG instances or HAMi shares).
    capacity = models.PositiveIntegerField(default=0)
    # Sum of nominal quotas may reach capacity x this factor; 1 = no overcommit (set it explicitly).
    overcommit_factor = models.DecimalField(max_digits=5, decimal_places=2, default=Decimal(1))
    node_labels = models.JSONField(default=dict, blank=True)
    tolerations = models.JSONField(default=list, blank=True)
    # Node taints of this flavor's nodes (Kueue ResourceFlavor nodeTaints).
    taints = models.JSONField(default=list, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    objects = CatalogQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def resource_name(self) -> str:
        return catalog.resource_name(self.mode, self.mig_profile)
