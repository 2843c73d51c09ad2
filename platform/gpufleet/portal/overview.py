"""What the home page shows: the fleet at a glance for admins, a tenant's state for its members.

Read models only (no writes): each function gathers the figures with a fixed number of queries, so the home
page costs the same however large the fleet is (per tenant shown, for the tenant home).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, time
from decimal import Decimal
from typing import Any

from django.db.models import Count, F, Window
from django.db.models.functions import RowNumber
from django.utils.safestring import mark_safe

from billing import charts
from billing.models import UsageRecord
from billing.month_to_date import (
    Allocation,
    MonthToDate,
    allocation_now,
    allocations_now,
    month_to_date,
    month_to_date_each,
)
from billing.trends import daily_spend
from gpufleet import clock
from gpufleet.audit.models import AuditEvent
from scheduling.clusters.models import Cluster
from scheduling.clusters.sync import latest as latest_sync
from scheduling.figures import flavor_figures
from scheduling.fleetops.models import IdleNotice
from scheduling.models import Flavor, InferenceEndpoint, Quota, QuotaChangeRequest
from scheduling.nodehealth.models import Remediation, RemediationPolicy
from tenants.models import Membership, Phase, Tenant

TENANTS_ON_HOME = 5
RECENT_ACTIVITY = 6


@dataclass(frozen=True)
class FlavorRow:
    """One flavor's figures as `scheduling.figures` defines them (installed, schedulable, sold, in use)."""

    name: str
    mode: str
    installed: int
    schedulable: int
    sold: int
    allocated: Decimal | None

    @property
    def sold_percent(self) -> int:
        return min(100, round(100 * self.sold / self.schedulable)) if self.schedulable else 0

    @property
    def oversold(self) -> bool:
        return self.sold > self.schedulable


def fleet(user: Any) -> dict[str, Any]:
    """Platform and billing admins' home: tenants by phase, GPUs per flavor, waiting work, sync, money."""
    counts = dict(Tenant.objects.values_list("phase").annotate(n=Count("id")).order_by())
    phases = [(phase.value, counts.get(phase.value, 0)) for phase in Phase if counts.get(phase.value)]
    allocation = allocation_now(UsageRecord.objects.all())
    visible = Flavor.objects.for_user(user).order_by("name")
    figures = flavor_figures(visible)
    flavors = [
        FlavorRow(f.name, f.mode, figures[f.name].installed, figures[f.name].schedulable, figures[f.name].sold,
                  allocation.units.get(f.name, Decimal(0)) if allocation.hour else None)
        for f in visible
    ]
    tenant_ids = list(Tenant.objects.exclude(phase__in=[Phase.REQUESTED, Phase.REJECTED])
                      .values_list("pk", flat=True))
    spend = month_to_date(tenant_ids)
    return {
        "phases": phases,
        "tenant_total": sum(counts.values()),
        "pending_tenants": counts.get(Phase.REQUESTED.value, 0),
        "flavors": flavors,
        "allocation_hour": allocation.hour,
        "quota_requests_waiting": QuotaChangeRequest.objects.filter(state=QuotaChangeRequest.State.PENDING).count(),
        "sync_run": latest_sync(),
        "spend": spend,
        "spend_chart": spend_chart(UsageRecord.objects.filter(tenant_id__in=tenant_ids), spend),
        "ops": fleet_operations(),
    }


def spend_chart(records: Any, spend: MonthToDate) -> str:
    """This month's cumulative spend per day and the forecast to the month's end (SVG)."""
    days, spent, forecast = daily_spend(records, spend.period, spend)
    if not any(v is not None for v in spent):
        return ""
    labels = [f"{d:%b} {d.day}" for d in days]
    return mark_safe(charts.line_chart(  # noqa: S308 - built by billing.charts, every text escaped
        labels, {f"spent ({spend.currency})": spent, f"forecast ({spend.currency})": forecast},
        chart_id="spend", dashed=[f"forecast ({spend.currency})"], unit=spend.currency,
        title=f"Spend in {spend.period:%B %Y}, cumulative, and the forecast",
        desc=f"{spend.spent} {spend.currency} spent so far; on track for {spend.forecast} {spend.currency} "
             f"by the end of the month."))


def fleet_operations() -> dict[str, Any]:
    """Counts for the fleet-operations tiles, from the database only (four queries)."""
    start = datetime.combine(clock.this_month(), time.min, tzinfo=UTC)
    policy = RemediationPolicy.current()
    return {
        "idle_notices": IdleNotice.objects.filter(created__gte=start).count(),
        "open_remediations": Remediation.objects.filter(finished__isnull=True).count(),
        "dry_run": policy.dry_run,
        "clusters": Cluster.objects.count(),
        "clusters_unreachable": Cluster.objects.filter(reachable=False).count(),
    }


@dataclass(frozen=True)
class QuotaRow:
    flavor: str
    nominal: int
    borrowing_limit: int | None
    in_use: Decimal

    @property
    def headroom(self) -> Decimal:
        return Decimal(self.nominal) - self.in_use


@dataclass
class TenantOverview:
    tenant: Tenant
    role: str
    quotas: list[QuotaRow]
    unquoted_use: dict[str, Decimal]
    allocation_hour: Any
    spend: MonthToDate | None
    endpoints: list[InferenceEndpoint]
    events: list[AuditEvent]
    pending_requests: int


def _quota_rows(quotas: list[Quota], allocation: Allocation) -> list[QuotaRow]:
    """One row per flavor: a tenant placed on several clusters has a quota per cluster, but units in use are
    measured per flavor, so the flavor's quotas add up (borrowing limits too; none if any is unlimited)."""
    nominal: dict[str, int] = defaultdict(int)
    borrowing: dict[str, int | None] = {}
    for q in quotas:
        name = q.flavor.name
        nominal[name] += q.nominal
        known = borrowing.get(name, 0)
        borrowing[name] = None if known is None or q.borrowing_limit is None else known + q.borrowing_limit
    return [QuotaRow(name, nominal[name], borrowing[name], allocation.units.get(name, Decimal(0)))
            for name in sorted(nominal)]


def tenant_overviews(user: Any, *, billing_admin: bool) -> tuple[list[TenantOverview], int]:
    """The caller's tenants (live ones first, at most TENANTS_ON_HOME) with their figures; and how many
    tenants the caller has in all."""
    roles = dict(Membership.objects.filter(user=user).values_list("tenant_id", "role"))
    tenants = list(Tenant.objects.for_user(user).exclude(phase__in=[Phase.DELETED, Phase.REJECTED])
                   .order_by("slug"))
    total = len(tenants)
    shown = tenants[:TENANTS_ON_HOME]
    ids = [t.pk for t in shown]
    # One query per kind of figure for all the tenants shown (not per tenant): the page costs the same
    # whatever the caller's number of tenants (tests/api/test_query_counts.py).
    allocations = allocations_now(UsageRecord.objects.filter(tenant_id__in=ids))
    quotas_of: dict[int, list[Quota]] = defaultdict(list)
    for q in Quota.objects.filter(tenant_id__in=ids).select_related("flavor"):
        quotas_of[q.tenant_id].append(q)
    endpoints_of: dict[int, list[InferenceEndpoint]] = defaultdict(list)
    for e in InferenceEndpoint.objects.filter(tenant_id__in=ids).select_related("tier"):
        endpoints_of[e.tenant_id].append(e)
    events_of: dict[str, list[AuditEvent]] = defaultdict(list)
    recent = (AuditEvent.objects.filter(tenant_slug__in=[t.slug for t in shown])
              .annotate(rank=Window(RowNumber(), partition_by=F("tenant_slug"), order_by=[F("created").desc(),
                                                                                          F("id").desc()]))
              .filter(rank__lte=RECENT_ACTIVITY).select_related("actor_user").order_by("-created", "-id"))
    for event in recent:
        events_of[event.tenant_slug].append(event)
    pending_of = dict(QuotaChangeRequest.objects.filter(tenant_id__in=ids, state=QuotaChangeRequest.State.PENDING)
                      .values_list("tenant_id").annotate(n=Count("id")).order_by())
    # Money is for the tenant's owners and the billing team (as invoices are).
    money_ids = [t.pk for t in shown if roles.get(t.pk, "") == Membership.Role.OWNER or billing_admin]
    spend_of = month_to_date_each(money_ids) if money_ids else {}
    out = []
    for tenant in shown:
        allocation = allocations.get(tenant.pk, Allocation(None, {}))
        quotas = _quota_rows(quotas_of[tenant.pk], allocation)
        quoted = {q.flavor for q in quotas}
        out.append(TenantOverview(
            tenant=tenant, role=roles.get(tenant.pk, ""), quotas=quotas,
            unquoted_use={k: v for k, v in allocation.units.items() if k not in quoted and v},
            allocation_hour=allocation.hour, spend=spend_of.get(tenant.pk),
            endpoints=endpoints_of[tenant.pk], events=events_of[tenant.slug],
            pending_requests=pending_of.get(tenant.pk, 0),
        ))
    return out, total
