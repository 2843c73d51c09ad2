"""The GPU catalog: GPU models and flavors (whole GPUs, MIG instances, HAMi shares)."""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.db import models

from gpufleet.core import sharing

from . import catalog

# Host clusters, per-cluster offers and tenant placements (issue 9).
from .models_clusters import (  # noqa: F401
    DEFAULT_CLUSTER,
    DEFAULT_CLUSTER_ID,
    Cluster,
    ClusterFlavor,
    Placement,
    PlacementChangeRequest,
    default_cluster_id,
)


class CatalogQuerySet(models.QuerySet):
    """The catalog (GPU models, flavors, node pools, cohorts) is public to every signed-in user: they need
    it to ask for quota."""

    def for_user(self, user: object) -> CatalogQuerySet:
        return self if getattr(user, "is_authenticated", False) else self.none()


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


# --- fleet inventory and quotas ---------------------------------------------------------------------


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


class Cohort(models.Model):
    """Tenants in one cohort lend and borrow idle quota; cohorts nest (Kueue parentName)."""

    name = models.CharField(max_length=63, unique=True)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="children")
    fair_sharing_weight = models.DecimalField(max_digits=8, decimal_places=3, default=Decimal(1))
    created = models.DateTimeField(auto_now_add=True)

    objects = CatalogQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class PriorityClass(models.Model):
    """A Kueue WorkloadPriorityClass; a tenant's default priority is one of these (KAI queue priority)."""

    name = models.CharField(max_length=63, unique=True)
    value = models.IntegerField()
    description = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["value", "name"]

    def __str__(self) -> str:
        return self.name


class ScopedQuerySet(models.QuerySet):
    """Rows that belong to a tenant: visible to its members and to platform/billing admins."""

    def for_user(self, user: object) -> ScopedQuerySet:
        from tenants.models import Tenant, sees_every_tenant

        if sees_every_tenant(user):
            # Every row: its tenant is a required, constrained foreign key, so "tenant in every tenant"
            # holds for all of them -- without that subquery the page is a join fewer to plan (3 ms of
            # PostgreSQL CPU per quota page: benchmarks/README.md, "API").
            return self
        return self.filter(tenant__in=Tenant.objects.for_user(user))


class TenantScheduling(models.Model):
    """Per-tenant scheduling settings: cohort, fair-sharing weight, priority class."""

    tenant = models.OneToOneField("tenants.Tenant", on_delete=models.CASCADE, related_name="scheduling")
    cohort = models.ForeignKey(Cohort, null=True, blank=True, on_delete=models.PROTECT, related_name="tenants")
    fair_sharing_weight = models.DecimalField(max_digits=8, decimal_places=3, default=Decimal(1))
    priority_class = models.ForeignKey(
        PriorityClass, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    objects = ScopedQuerySet.as_manager()

    def __str__(self) -> str:
        return f"scheduling of {self.tenant_id}"


class Quota(models.Model):
    """Kueue numbers for one tenant and flavor, in units of the flavor. None = no limit."""

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="quotas")
    flavor = models.ForeignKey(Flavor, on_delete=models.PROTECT, related_name="quotas")
    cluster = models.ForeignKey(
        "scheduling.Cluster", on_delete=models.PROTECT, related_name="quotas", default=default_cluster_id,
        db_default=DEFAULT_CLUSTER_ID,
    )
    nominal = models.PositiveIntegerField()
    borrowing_limit = models.PositiveIntegerField(null=True, blank=True)
    lending_limit = models.PositiveIntegerField(null=True, blank=True)
    updated = models.DateTimeField(auto_now=True)

    objects = ScopedQuerySet.as_manager()

    class Meta:
        ordering = ["tenant__slug", "flavor__name", "cluster__name"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "flavor", "cluster"], name="quota_unique_tenant_flavor_cluster")
        ]

    def __str__(self) -> str:
        return f"{self.tenant_id}/{self.flavor_id}: {self.nominal}"

    def spec(self) -> dict[str, object]:
        return {
            "flavor": self.flavor.name,
            "nominal": self.nominal,
            "borrowing_limit": self.borrowing_limit,
            "lending_limit": self.lending_limit,
        }


class QuotaChangeRequest(models.Model):
    """A tenant admin's proposed quota; a platform admin approves (applies) or rejects it."""

    class State(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        REJECTED = "rejected"

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="quota_requests")
    flavor = models.ForeignKey(Flavor, on_delete=models.PROTECT, related_name="+")
    cluster = models.ForeignKey(
        "scheduling.Cluster", on_delete=models.PROTECT, related_name="+", default=default_cluster_id,
        db_default=DEFAULT_CLUSTER_ID,
    )
    nominal = models.PositiveIntegerField()
    borrowing_limit = models.PositiveIntegerField(null=True, blank=True)
    lending_limit = models.PositiveIntegerField(null=True, blank=True)
    reason = models.TextField(blank=True)
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING, db_index=True)
    proposed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    review_comment = models.TextField(blank=True)
    # GitOps mode: the proposal branch and, once merged, the revision on main.
    branch = models.CharField(max_length=100, blank=True)
    revision = models.CharField(max_length=64, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    reviewed_at = models.DateTimeField(null=True, blank=True)

    objects = ScopedQuerySet.as_manager()

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return f"quota request {self.pk} ({self.state})"

    def spec(self) -> dict[str, object]:
        return {
            "flavor": self.flavor.name,
            "nominal": self.nominal,
            "borrowing_limit": self.borrowing_limit,
            "lending_limit": self.lending_limit,
        }

class QuotaSimulation(models.Model):
    """The simulated effect of a quota request on its cohort (scheduling/quota_simulation.py), computed
    once by the worker (scheduling.simulate_quota_request) and cached per request. The row is created
    pending with the request, in the same transaction: the worker -- or the sweep -- fills it in."""

    class State(models.TextChoices):
        PENDING = "pending"
        DONE = "done"
        FAILED = "failed"

    request = models.OneToOneField("QuotaChangeRequest", on_delete=models.CASCADE, related_name="simulation")
    days = models.PositiveSmallIntegerField(default=7, help_text="days of recorded demand replayed")
    seed = models.IntegerField(default=0)
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING, db_index=True)
    result = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)
    computed_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"simulation of quota request {self.request_id} ({self.state})"


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



class SlaTier(models.Model):
    """Scale-to-zero policy of an inference endpoint. Defaults are seeded; platform admins edit them."""

    name = models.CharField(max_length=30, unique=True)
    min_replicas = models.PositiveSmallIntegerField()
    max_replicas = models.PositiveSmallIntegerField(default=4)
    cooldown_seconds = models.PositiveIntegerField(default=300)
    polling_seconds = models.PositiveIntegerField(default=30)
    # Cron pre-warm (KEDA cron trigger) in GPUFLEET_BUSINESS_TIMEZONE; empty = none.
    prewarm_start = models.CharField(max_length=40, blank=True)
    prewarm_end = models.CharField(max_length=40, blank=True)
    prewarm_replicas = models.PositiveSmallIntegerField(default=1)
    description = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["-min_replicas", "name"]

    def __str__(self) -> str:
        return self.name


class InferenceEndpoint(models.Model):
    """A vLLM deployment in the tenant's namespace, scaled (to zero) by KEDA on queue depth and KV cache."""

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="endpoints")
    name = models.CharField(max_length=50)
    model = models.CharField(max_length=200, help_text="served model name (vLLM `model_name` label)")
    deployment = models.CharField(max_length=63, help_text="the Deployment KEDA scales")
    tier = models.ForeignKey(SlaTier, on_delete=models.PROTECT, related_name="endpoints")
    # Scale out when this many requests wait per replica, or the KV cache is this full (0-1).
    queue_target = models.PositiveIntegerField(default=5)
    kv_cache_target = models.DecimalField(max_digits=4, decimal_places=3, default=Decimal("0.800"))
    # Issue 26, F6: a gated Hugging Face model cannot be downloaded without the tenant's token, so its pods
    # mount the token Secret as required (they wait for it) and the endpoint needs a secret store to exist.
    gated = models.BooleanField(default=False, db_default=False,  # old code's INSERTs lack it (expand/contract)
                                help_text="the model is gated: serving needs the tenant's Hugging Face token from "
                                          "OpenBao")
    created = models.DateTimeField(auto_now_add=True)

    objects = ScopedQuerySet.as_manager()

    class Meta:
        ordering = ["tenant__slug", "name"]
        constraints = [models.UniqueConstraint(fields=["tenant", "name"], name="endpoint_unique_tenant_name")]

    def __str__(self) -> str:
        return f"{self.tenant_id}/{self.name}"


# Fleet sync runs live in their own module (owned by the GitOps sync); importing registers the model.
from .models_sync import SyncRun  # noqa: E402, F401
