"""The classification table (tunable), the remediation limits, and remediations with their audited steps."""

from __future__ import annotations

from decimal import Decimal

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q


class State(models.TextChoices):
    """Ordered by severity: a node's state is the most severe state any rule gives it."""

    HEALTHY = "healthy", "healthy"
    WATCH = "watch", "watch"
    CORDON = "cordon", "cordon"
    DRAIN = "drain", "drain"
    REPLACE = "replace", "replace"


SEVERITY = {state: rank for rank, state in enumerate(State.values)}


class Signal(models.TextChoices):
    XID = "xid", "XID error (match = the XID code)"
    ROW_REMAP_FAILURE = "row_remap_failure", "row remapping failed"
    ROW_REMAP_PENDING = "row_remap_pending", "row remapping pending (needs a GPU reset)"
    UNCORRECTABLE_REMAPPED_ROWS = "uncorrectable_remapped_rows", "rows remapped for uncorrectable errors"
    ECC_DBE_VOLATILE = "ecc_dbe_volatile", "volatile double-bit ECC errors"
    PCIE_REPLAYS = "pcie_replays", "PCIe replays"
    THERMAL_VIOLATION = "thermal_violation", "thermal throttling (% of the window)"
    POWER_VIOLATION = "power_violation", "power throttling (% of the window)"
    NODE_CONDITION = "node_condition", "node condition is True (match = condition type)"
    UNHEALTHY_GPUS = "unhealthy_gpus", "GPUs the device plugin withdrew (capacity - allocatable)"


class HealthRule(models.Model):
    """One row of the classification table: `signal` (and `match`) at or above `threshold` -> `state`.

    The table is data: the admin tunes it (Django admin or `gpufleet fleet health-rules`); the migration
    seeds the defaults of `scheduling.nodehealth.rules.DEFAULT_RULES`."""

    signal = models.CharField(max_length=40, choices=Signal.choices)
    match = models.CharField(max_length=100, blank=True,
                             help_text="the XID code for `xid`, the condition type for `node_condition`")
    threshold = models.DecimalField(max_digits=20, decimal_places=4, default=Decimal(1),
                                    validators=[MinValueValidator(Decimal("0.0001"))])
    state = models.CharField(max_length=10, choices=[c for c in State.choices if c[0] != State.HEALTHY])
    description = models.CharField(max_length=300, blank=True)
    enabled = models.BooleanField(default=True)

    class Meta:
        ordering = ["signal", "match", "threshold"]
        constraints = [models.UniqueConstraint(fields=["signal", "match", "state"], name="nodehealth_rule_unique")]

    def __str__(self) -> str:
        what = f"{self.signal}={self.match}" if self.match else self.signal
        return f"{what} >= {self.threshold} -> {self.state}"

    def clean(self) -> None:
        from .rules import validate_rule

        validate_rule(self.signal, self.match, self.threshold, self.state)


class RemediationPolicy(models.Model):
    """The fleet's remediation limits (one row). A new fleet starts in dry-run: nothing is cordoned or
    evicted until an admin turns dry-run off."""

    dry_run = models.BooleanField(default=True)
    max_nodes = models.PositiveSmallIntegerField(default=1, validators=[MinValueValidator(0)],
                                                 help_text="nodes in remediation at once, fleet-wide")
    max_percent = models.DecimalField(max_digits=5, decimal_places=2, default=Decimal(10),
                                      validators=[MinValueValidator(Decimal(0)), MaxValueValidator(Decimal(100))],
                                      help_text="percent of a flavor's nodes in remediation at once (at least one)")
    window_minutes = models.PositiveIntegerField(default=60, validators=[MinValueValidator(1)],
                                                 help_text="how far back health series are read")
    updated = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"remediation policy (dry-run={self.dry_run}, max {self.max_nodes} nodes / {self.max_percent} %)"

    @classmethod
    def current(cls) -> RemediationPolicy:
        policy, _ = cls.objects.get_or_create(pk=1)
        return policy


class Phase(models.TextChoices):
    PLANNED = "planned", "planned (dry-run: nothing done)"
    CORDONED = "cordoned", "cordoned"
    DRAINING = "draining", "draining (evictions under way)"
    DRAINED = "drained", "drained"
    REPLACING = "replacing", "NodeClaim deleted, Karpenter replaces the node"
    CLOSED = "closed", "closed"


class Remediation(models.Model):
    """One node's way through cordon -> drain -> (replace). Open until a human uncordons the node (or,
    for a dry-run plan, until the node is healthy again). At most one open remediation per node."""

    node = models.CharField(max_length=253, db_index=True)
    flavor = models.CharField(max_length=63, blank=True)
    target_state = models.CharField(max_length=10, choices=State.choices)
    phase = models.CharField(max_length=12, choices=Phase.choices)
    dry_run = models.BooleanField()
    nodeclaim = models.CharField(max_length=253, blank=True)
    reasons = models.JSONField(default=list)
    evidence = models.JSONField(default=list)
    started = models.DateTimeField()
    updated = models.DateTimeField()
    finished = models.DateTimeField(null=True, blank=True)
    closed_because = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["-started", "-id"]
        constraints = [models.UniqueConstraint(fields=["node"], condition=Q(finished__isnull=True),
                                               name="nodehealth_one_open_remediation_per_node")]

    def __str__(self) -> str:
        return f"{self.node}: {self.target_state} ({self.phase}{', dry-run' if self.dry_run else ''})"

    @property
    def is_open(self) -> bool:
        return self.finished is None


class RemediationStep(models.Model):
    """One step and its evidence (the metric samples or conditions that triggered it); append-only by use."""

    remediation = models.ForeignKey(Remediation, on_delete=models.CASCADE, related_name="steps")
    at = models.DateTimeField()
    action = models.CharField(max_length=30)  # cordon, evict, delete-nodeclaim, uncordon, blocked, plan, close
    target = models.CharField(max_length=300, blank=True)  # the pod evicted, the NodeClaim deleted
    outcome = models.CharField(max_length=30)  # done, dry-run, blocked, failed, skipped
    detail = models.CharField(max_length=1000, blank=True)
    evidence = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.action} {self.target} {self.outcome}"
