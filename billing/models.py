"""Billing rows: measured usage, prices, invoices and the per-year invoice counter.

Money is `Decimal` with an explicit currency; times are UTC-aware. A finalized invoice never
changes: the model and queryset refuse it here, and on PostgreSQL a trigger refuses it for any
other path (raw SQL, another client) as well (see migration 0002).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.db import models
from django.db.models import Q

from gpufleet.accounts.roles import is_billing_admin
from gpufleet.core.errors import Conflict
from scheduling.models import DEFAULT_CLUSTER_ID, Cluster, Flavor, default_cluster_id
from tenants.models import Tenant

SECONDS = {"max_digits": 20, "decimal_places": 3}
MONEY = {"max_digits": 18, "decimal_places": 2}
UNIT_PRICE = {"max_digits": 18, "decimal_places": 6}


class FinalizedInvoiceError(Conflict):
    """Something tried to change a finalized or void invoice (void and reissue instead). A Conflict,
    so the API answers 409 and the CLI prints it, whichever path tried."""


def _for_tenant_scope(qs: models.QuerySet, user: Any, tenant_path: str, *, owners_only: bool) -> models.QuerySet:
    if user is None or not user.is_authenticated:
        return qs.none()
    if is_billing_admin(user):
        return qs
    lookup = {f"{tenant_path}__memberships__user": user}
    if owners_only:
        lookup[f"{tenant_path}__memberships__role"] = "owner"
    return qs.filter(**lookup).distinct()


class UsageRecordQuerySet(models.QuerySet):
    def for_user(self, user: Any) -> UsageRecordQuerySet:
        """Members of a tenant see its usage; billing and platform admins see all."""
        return _for_tenant_scope(self, user, "tenant", owners_only=False)


class UsageRecord(models.Model):
    """Measured usage of one tenant, one flavor, on one host cluster, in one clock hour (UTC)."""

    # No separate FK indexes: the unique (tenant, flavor, cluster, hour) index serves tenant lookups, and a
    # month of a large fleet is ~3 x 10^5 rows written at once, where every index costs. No database FK
    # constraints either (db_constraint=False): PostgreSQL checks those with one trigger call per row and
    # reference, which cost three times the COPY itself (29 s vs 9 s for a month's rows on the loaded
    # 2-core machine). The only writer, actions.store_usage_batches, takes the lock such a check takes
    # (FOR KEY SHARE) on the referenced tenants, flavors and clusters once per batch instead, and deletes go
    # through the ORM, whose PROTECT refuses a tenant, flavor or cluster that has usage.
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="usage_records", db_index=False,
                               db_constraint=False)
    flavor = models.ForeignKey(Flavor, on_delete=models.PROTECT, related_name="usage_records", db_index=False,
                               db_constraint=False)
    # Rows measured before clusters existed are the `default` cluster's (the upgraded installation).
    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="usage_records", db_index=False,
                                db_constraint=False, default=default_cluster_id, db_default=DEFAULT_CLUSTER_ID)
    hour = models.DateTimeField(help_text="start of the UTC hour")
    # seconds x units held (GPUs, MIG instances, or the HAMi share of one GPU)
    unit_seconds = models.DecimalField(**SECONDS)
    # unit_seconds x the flavor's weight at collection time
    gpu_equivalent_seconds = models.DecimalField(**SECONDS)
    collected_at = models.DateTimeField()
    window_start = models.DateTimeField(help_text="the collection window this row came from")
    window_end = models.DateTimeField()

    objects = UsageRecordQuerySet.as_manager()

    class Meta:
        ordering = ["hour", "tenant_id", "flavor_id", "cluster_id"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "flavor", "cluster", "hour"],
                                    name="usage_tenant_flavor_cluster_hour"),
            models.CheckConstraint(condition=Q(unit_seconds__gte=0) & Q(gpu_equivalent_seconds__gte=0),
                                   name="usage_non_negative"),
        ]
        indexes = [models.Index(fields=["hour"], name="usage_hour_idx")]

    def __str__(self) -> str:
        return f"{self.tenant_id}/{self.flavor_id}/{self.cluster_id}@{self.hour:%Y-%m-%dT%H}"


class UsageCollection(models.Model):
    """One collection run over a window: what it stored and what it could not attribute."""

    window_start = models.DateTimeField()
    window_end = models.DateTimeField()
    collected_at = models.DateTimeField()
    records = models.PositiveIntegerField(default=0)
    replaced = models.PositiveIntegerField(default=0, help_text="rows of earlier runs this run replaced")
    unit_seconds = models.DecimalField(**SECONDS, default=Decimal(0))
    # Samples naming a tenant or flavor gpufleet does not know: {"tenants": [...], "flavors": [...]}
    skipped = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-collected_at"]

    def __str__(self) -> str:
        return f"usage {self.window_start:%Y-%m-%dT%H:%M}..{self.window_end:%Y-%m-%dT%H:%M}"


class PriceQuerySet(models.QuerySet):
    def for_user(self, user: Any) -> PriceQuerySet:
        """The price list is public to every signed-in user (they need it to plan)."""
        return self if user is not None and user.is_authenticated else self.none()


class Price(models.Model):
    """Price of one unit-hour of a flavor in one currency, from `effective_from` (inclusive)
    to `effective_to` (exclusive, open when null), on every cluster (`cluster` null) or on one cluster
    (which then wins over the every-cluster price). Ranges of one flavor+cluster+currency never overlap."""

    class Source(models.TextChoices):
        ENTERED = "entered"
        OPENCOST = "opencost", "Derived from OpenCost's GPU hourly cost"

    flavor = models.ForeignKey(Flavor, on_delete=models.PROTECT, related_name="prices")
    cluster = models.ForeignKey(Cluster, null=True, blank=True, on_delete=models.PROTECT, related_name="prices",
                                help_text="null: every cluster; a cluster's own price wins over it")
    currency = models.CharField(max_length=3)
    per_unit_hour = models.DecimalField(**UNIT_PRICE)
    effective_from = models.DateField()
    effective_to = models.DateField(null=True, blank=True)
    source = models.CharField(max_length=10, choices=Source.choices, default=Source.ENTERED)
    # For derived prices: OpenCost's hourly cost of one GPU of this model, and the markup applied.
    opencost_gpu_hourly = models.DecimalField(max_digits=18, decimal_places=6, null=True, blank=True)
    markup = models.DecimalField(max_digits=8, decimal_places=4, null=True, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    objects = PriceQuerySet.as_manager()

    class Meta:
        ordering = ["flavor__name", "cluster__name", "currency", "effective_from"]
        constraints = [
            # NULL is distinct from NULL in a unique index: the every-cluster prices get their own.
            models.UniqueConstraint(fields=["flavor", "currency", "effective_from"], condition=Q(cluster__isnull=True),
                                    name="price_unique_start"),
            models.UniqueConstraint(fields=["flavor", "cluster", "currency", "effective_from"],
                                    condition=Q(cluster__isnull=False), name="price_unique_start_cluster"),
            models.CheckConstraint(condition=Q(per_unit_hour__gte=0), name="price_non_negative"),
            models.CheckConstraint(
                condition=Q(effective_to__isnull=True) | Q(effective_to__gt=models.F("effective_from")),
                name="price_range_ordered"),
        ]

    def __str__(self) -> str:
        where = f" on {self.cluster}" if self.cluster_id else ""
        return f"{self.flavor}{where} {self.per_unit_hour} {self.currency}/unit-hour from {self.effective_from}"

    def snapshot(self) -> dict[str, Any]:
        return {
            "flavor": self.flavor.name, "cluster": self.cluster.name if self.cluster_id else None,  # type: ignore[union-attr]
            "currency": self.currency, "per_unit_hour": str(self.per_unit_hour),
            "effective_from": self.effective_from.isoformat(),
            "effective_to": self.effective_to.isoformat() if self.effective_to else None,
            "source": self.source,
            "opencost_gpu_hourly": None if self.opencost_gpu_hourly is None else str(self.opencost_gpu_hourly),
            "markup": None if self.markup is None else str(self.markup),
        }


class InvoiceQuerySet(models.QuerySet):
    def for_user(self, user: Any) -> InvoiceQuerySet:
        """Tenant owners see their invoices; billing and platform admins see all."""
        return _for_tenant_scope(self, user, "tenant", owners_only=True)

    def update(self, **kwargs: Any) -> int:
        # A bulk update must not reach finalized or void rows: they change only through actions.void.
        if self.exclude(state=Invoice.State.DRAFT).exists():
            raise FinalizedInvoiceError("finalized or void invoices cannot be changed; void and reissue instead")
        return super().update(**kwargs)


class Invoice(models.Model):
    class State(models.TextChoices):
        DRAFT = "draft"
        FINALIZED = "finalized"
        VOID = "void"

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="invoices")
    period = models.DateField(help_text="first day of the billed month")
    currency = models.CharField(max_length=3)
    state = models.CharField(max_length=10, choices=State.choices, default=State.DRAFT, db_index=True)
    number = models.CharField(max_length=32, null=True, blank=True, unique=True)
    number_year = models.PositiveIntegerField(null=True, blank=True)
    number_seq = models.PositiveIntegerField(null=True, blank=True)
    subtotal = models.DecimalField(**MONEY, default=Decimal("0.00"))
    total = models.DecimalField(**MONEY, default=Decimal("0.00"))
    # OpenCost's view of the same namespace and window (per namespace: OpenCost cannot tell flavors apart).
    opencost_cost = models.DecimalField(max_digits=18, decimal_places=5, null=True, blank=True)
    opencost_gpu_hours = models.DecimalField(max_digits=18, decimal_places=5, null=True, blank=True)
    content_hash = models.CharField(max_length=64, blank=True)
    replaces = models.OneToOneField("self", null=True, blank=True, on_delete=models.PROTECT,
                                    related_name="reissued_as")
    created = models.DateTimeField(auto_now_add=True)
    drafted_at = models.DateTimeField(null=True, blank=True)
    finalized_at = models.DateTimeField(null=True, blank=True)
    voided_at = models.DateTimeField(null=True, blank=True)
    void_reason = models.TextField(blank=True)

    objects = InvoiceQuerySet.as_manager()

    class Meta:
        ordering = ["-period", "tenant__slug"]
        constraints = [
            # One live (draft or finalized) invoice per tenant, month and currency; void ones are history.
            models.UniqueConstraint(fields=["tenant", "period", "currency"], condition=~Q(state="void"),
                                    name="invoice_one_live_per_period"),
            models.UniqueConstraint(fields=["number_year", "number_seq"], name="invoice_number_unique"),
        ]

    def __str__(self) -> str:
        return self.number or f"draft {self.tenant_id} {self.period:%Y-%m}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        # Only the actions module may move a row out of draft (it sets _transition for that one save).
        transition = self.__dict__.pop("_transition", False)  # good for one save only
        if self.pk and not transition:
            stored = type(self).objects.filter(pk=self.pk).values_list("state", flat=True).first()
            if stored in (self.State.FINALIZED, self.State.VOID):
                raise FinalizedInvoiceError(f"invoice {self.number} is {stored} and cannot be changed")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> Any:
        if self.state != self.State.DRAFT:
            raise FinalizedInvoiceError(f"invoice {self.number} is {self.state} and cannot be deleted")
        return super().delete(*args, **kwargs)

    @property
    def period_label(self) -> str:
        return self.period.strftime("%Y-%m")


class InvoiceLineQuerySet(models.QuerySet):
    def for_user(self, user: Any) -> InvoiceLineQuerySet:
        return _for_tenant_scope(self, user, "invoice__tenant", owners_only=True)

    def update(self, **kwargs: Any) -> int:
        if self.exclude(invoice__state=Invoice.State.DRAFT).exists():
            raise FinalizedInvoiceError("lines of finalized or void invoices cannot be changed")
        return super().update(**kwargs)


class InvoiceLine(models.Model):
    class Kind(models.TextChoices):
        USAGE = "usage"
        ADJUSTMENT = "adjustment", "Correction of an earlier, finalized period"
        IDLE = "idle", "Share of the fleet's idle GPU-hours"

    invoice = models.ForeignKey(Invoice, on_delete=models.CASCADE, related_name="lines")
    position = models.PositiveSmallIntegerField()
    kind = models.CharField(max_length=12, choices=Kind.choices)
    flavor = models.ForeignKey(Flavor, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    flavor_name = models.CharField(max_length=63, blank=True)
    # Where the usage ran, and a snapshot of its region as billed (a cluster may move or be renamed later).
    # Null on lines drafted before clusters existed and on fleet-wide lines (the idle share).
    cluster = models.ForeignKey(Cluster, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    # db_default: the previous release's code inserts lines without these columns during an upgrade.
    cluster_name = models.CharField(max_length=63, blank=True, default="", db_default="")
    region = models.CharField(max_length=63, blank=True, default="", db_default="", help_text="FOCUS RegionId")
    region_name = models.CharField(max_length=200, blank=True, default="", db_default="",
                                   help_text="FOCUS RegionName")
    availability_zone = models.CharField(max_length=63, blank=True, default="", db_default="",
                                         help_text="FOCUS AvailabilityZone, when the cluster has exactly one")
    description = models.CharField(max_length=300)
    charge_start = models.DateTimeField()
    charge_end = models.DateTimeField()
    quantity = models.DecimalField(max_digits=20, decimal_places=6, help_text="unit-hours")
    unit_price = models.DecimalField(**UNIT_PRICE)
    amount = models.DecimalField(**MONEY)
    unit_seconds = models.DecimalField(**SECONDS)
    gpu_equivalent_seconds = models.DecimalField(**SECONDS)
    # Adjustments: what the finalized invoice billed and what is measured now.
    billed_unit_seconds = models.DecimalField(**SECONDS, null=True, blank=True)
    measured_unit_seconds = models.DecimalField(**SECONDS, null=True, blank=True)
    adjusts = models.ForeignKey(Invoice, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    price = models.ForeignKey(Price, null=True, blank=True, on_delete=models.PROTECT, related_name="+")

    objects = InvoiceLineQuerySet.as_manager()

    class Meta:
        ordering = ["invoice_id", "position"]
        constraints = [models.UniqueConstraint(fields=["invoice", "position"], name="invoice_line_position")]

    def __str__(self) -> str:
        return f"{self.invoice_id}#{self.position} {self.description}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if Invoice.objects.filter(pk=self.invoice_id).exclude(state=Invoice.State.DRAFT).exists():
            raise FinalizedInvoiceError("lines of finalized or void invoices cannot be changed")
        super().save(*args, **kwargs)


class InvoiceCounter(models.Model):
    """The last invoice number issued in a year. Locked (SELECT ... FOR UPDATE) while finalizing,
    so numbers are gapless: a number is taken only in the transaction that finalizes the invoice."""

    year = models.PositiveIntegerField(primary_key=True)
    last = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.year}: {self.last}"
