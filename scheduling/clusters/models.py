"""Host clusters, what each offers (flavors with capacity) and where each tenant is placed.

GPU models and flavors are global; a cluster offers a flavor with a capacity of its own (ClusterFlavor), has its
own node pools, and hosts the tenants placed on it. Every tenant has exactly one home placement (its vCluster
control plane runs there) and may have more placements (namespace, queues and policies rendered there too).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models

from tenants.models import Tenant

# The cluster an existing single-cluster installation becomes (migration scheduling 0008) and the one rows
# without an explicit cluster belong to.
DEFAULT_CLUSTER = "default"
# Its id in a migrated database (the first row of the table, migration 0008): the DATABASE default of the
# per-cluster foreign keys, for the previous release's code that inserts rows without a cluster during an
# upgrade. Python code always uses `default_cluster_id()` (the row may have been recreated since).
DEFAULT_CLUSTER_ID = 1


class ClusterQuerySet(models.QuerySet):
    """Clusters (name, purpose, region) are public to signed-in users: they need them to ask for quota."""

    def for_user(self, user: object) -> ClusterQuerySet:
        return self if getattr(user, "is_authenticated", False) else self.none()


class Cluster(models.Model):
    class Purpose(models.TextChoices):
        TRAINING = "training"
        INFERENCE = "inference"
        DEV = "dev"
        GENERAL = "general"

    name = models.CharField(max_length=63, unique=True, help_text="Kubernetes DNS label")
    purpose = models.CharField(max_length=20, choices=Purpose.choices, default=Purpose.GENERAL)
    region = models.CharField(max_length=63, blank=True, help_text="region id, e.g. eu-west-1")
    region_name = models.CharField(max_length=200, blank=True, help_text="human name of the region")
    zones = models.JSONField(default=list, blank=True, help_text="availability zones, may be empty")
    # Tenant trust levels this cluster may host; empty = every level.
    trust_levels = models.JSONField(default=list, blank=True)
    # Delivery. GitOps: the cluster's tree in the repository (blank = clusters/<name>). Kubernetes backend: the
    # API URL and a REFERENCE to where its credentials live (a Secret name or a kubeconfig file path) -- the
    # credentials themselves are never stored here nor rendered.
    gitops_path = models.CharField(max_length=200, blank=True)
    kube_api = models.CharField(max_length=300, blank=True)
    kubeconfig_secret = models.CharField(max_length=300, blank=True)
    # Monitoring: its own metrics source (blank = the platform's GPUFLEET_METRICS_URL) and the value of the
    # `cluster` external label its vmagent/Prometheus adds (blank = no label filter).
    metrics_url = models.CharField(max_length=300, blank=True)
    metrics_label = models.CharField(max_length=63, blank=True)
    # Status, written by the fleet pass: reachable None = not yet tried.
    reachable = models.BooleanField(null=True, blank=True)
    last_sync_at = models.DateTimeField(null=True, blank=True)
    drift = models.PositiveIntegerField(default=0)
    status_message = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)

    objects = ClusterQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def tree(self) -> str:
        """The cluster's folder in the GitOps repository."""
        return self.gitops_path or f"clusters/{self.name}"

    def allows_trust(self, trust_level: str) -> bool:
        return not self.trust_levels or trust_level in self.trust_levels

    def spec(self) -> dict[str, Any]:
        return {
            "name": self.name, "purpose": self.purpose, "region": self.region, "region_name": self.region_name,
            "zones": list(self.zones), "trust_levels": list(self.trust_levels), "gitops_path": self.gitops_path,
            "kube_api": self.kube_api, "kubeconfig_secret": self.kubeconfig_secret,
            "metrics_url": self.metrics_url, "metrics_label": self.metrics_label,
        }


def default_cluster_id() -> int:
    """The `default` cluster's id: the default of every per-cluster foreign key, so single-cluster code paths
    (and rows created without a cluster) keep working. Created on first use if a flush removed it."""
    pk = Cluster.objects.filter(name=DEFAULT_CLUSTER).values_list("pk", flat=True).first()
    if pk is None:
        pk = Cluster.objects.get_or_create(name=DEFAULT_CLUSTER, defaults={"purpose": Cluster.Purpose.GENERAL})[0].pk
    return pk


class ClusterFlavor(models.Model):
    """A flavor offered on a cluster, with the units it has there. Flavor.capacity is the fleet total (the sum)."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="flavors")
    flavor = models.ForeignKey("scheduling.Flavor", on_delete=models.CASCADE, related_name="cluster_offers")
    capacity = models.PositiveIntegerField(default=0)

    objects = ClusterQuerySet.as_manager()

    class Meta:
        ordering = ["cluster__name", "flavor__name"]
        constraints = [models.UniqueConstraint(fields=["cluster", "flavor"], name="clusterflavor_unique")]

    def __str__(self) -> str:
        return f"{self.flavor_id} on {self.cluster_id}: {self.capacity}"


class PlacementQuerySet(models.QuerySet):
    def for_user(self, user: object) -> PlacementQuerySet:
        return self.filter(tenant__in=Tenant.objects.for_user(user))


class Placement(models.Model):
    """A tenant on a cluster: its namespace, queues and policies are rendered there; the home placement also
    runs the tenant's vCluster control plane."""

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="placements")
    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="placements")
    home = models.BooleanField(default=False)
    # Kubernetes-style conditions of this placement ({type, status, reason, message, lastTransitionTime}),
    # e.g. Reconciled=False reason ClusterUnreachable when its cluster did not answer.
    conditions = models.JSONField(default=list, blank=True)
    last_reconciled_at = models.DateTimeField(null=True, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    objects = PlacementQuerySet.as_manager()

    class Meta:
        ordering = ["tenant__slug", "-home", "cluster__name"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "cluster"], name="placement_unique_tenant_cluster"),
            models.UniqueConstraint(fields=["tenant"], condition=models.Q(home=True), name="placement_one_home"),
        ]

    def __str__(self) -> str:
        return f"{self.tenant_id} on {self.cluster_id}{' (home)' if self.home else ''}"

    def condition(self, type_: str) -> dict[str, Any] | None:
        return next((c for c in self.conditions if c.get("type") == type_), None)


class PlacementChangeRequest(models.Model):
    """A proposed placement change (add a cluster, remove one, move the home); a platform admin approves
    (applies) or rejects it -- the same reviewed, audited flow as a quota change request."""

    class Action(models.TextChoices):
        ADD = "add"
        REMOVE = "remove"
        SET_HOME = "set-home"

    class State(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        REJECTED = "rejected"

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="placement_requests")
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    action = models.CharField(max_length=10, choices=Action.choices)
    reason = models.TextField(blank=True)
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING, db_index=True)
    proposed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    review_comment = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)
    reviewed_at = models.DateTimeField(null=True, blank=True)

    objects = PlacementQuerySet.as_manager()

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return f"placement request {self.pk} ({self.action} {self.cluster_id}, {self.state})"

    def spec(self) -> dict[str, object]:
        return {"cluster": self.cluster.name, "action": self.action}
