"""Wires the catalog, billing's metering settings, the fleet's and tenants' thresholds and prices to the
pure measurement (`measure`). Used by the CLI, the API and the pages."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from billing import collect as billing_collect
from billing.invoicing import money
from billing.metering.usage import HAMI, RangeQuerier
from billing.models import Price
from gpufleet.core import conf
from scheduling.models import Flavor, Quota
from scheduling.render import cluster_queue_name
from tenants.models import Tenant, sees_every_tenant

from . import measure, queues, rollup
from .models import FleetSettings, TenantIdleSettings
from .promql import Thresholds


def options() -> measure.Options:
    opts = billing_collect.options()
    return measure.Options(scrape_interval=int(opts["scrape_interval"]),  # type: ignore[call-overload]
                           max_gap_scrapes=int(opts["max_gap_scrapes"]),  # type: ignore[call-overload]
                           share_rule=str(opts["share_rule"]), usage_metric=str(opts["usage_metric"]),
                           dialect=str(opts["dialect"]))


def _thresholds(fleet: FleetSettings, own: TenantIdleSettings | None) -> Thresholds:
    def pick(name: str) -> Decimal:
        value = getattr(own, name, None) if own is not None else None
        return Decimal(value if value is not None else getattr(fleet, name))
    return Thresholds(engine=pick("engine_threshold"), dram=pick("dram_threshold"),
                      gpu_util=pick("gpu_util_threshold"))


def threshold_groups(fleet: FleetSettings) -> tuple[list[measure.ThresholdGroup], dict[str, int]]:
    """One group per distinct tenant threshold set (plus the fleet default) and per-tenant minimum runs."""
    default = _thresholds(fleet, None)
    by_thresholds: dict[Thresholds, list[str]] = defaultdict(list)
    min_minutes: dict[str, int] = {}
    for own in TenantIdleSettings.objects.select_related("tenant"):
        th = _thresholds(fleet, own)
        if own.min_idle_minutes is not None:
            min_minutes[own.tenant.slug] = own.min_idle_minutes
        if th != default:
            by_thresholds[th].append(f"{measure.TENANT_PREFIX}{own.tenant.slug}")
    groups = [measure.ThresholdGroup(th, tuple(sorted(ns))) for th, ns in by_thresholds.items()]
    return [measure.ThresholdGroup(default), *groups], min_minutes


def _price_table(currency: str) -> dict[str, list[Price]]:
    table: dict[str, list[Price]] = defaultdict(list)
    for price in Price.objects.filter(currency=currency).select_related("flavor"):
        table[price.flavor.name].append(price)
    return table


def _price(table: dict[str, list[Price]], flavor: str, moment: datetime) -> Decimal | None:
    day = moment.date()
    for price in table.get(flavor, []):
        if price.effective_from <= day and (price.effective_to is None or day < price.effective_to):
            return price.per_unit_hour
    return None


def idle_findings(start: datetime, end: datetime, *, tenants: list[str] | None = None,
                  min_idle_minutes: int | None = None, client: RangeQuerier | None = None) -> list[dict[str, Any]]:
    """Idle findings in [start, end), optionally only for the given tenant slugs. `min_idle_minutes`
    overrides every tenant's minimum (the CLI's --min-idle)."""
    fleet = FleetSettings.current()
    groups, per_tenant = threshold_groups(fleet)
    specs = billing_collect.flavor_specs()
    # The fleet's groups select the roll-ups; a tenant filter narrows what is read and measured raw.
    wanted = None if tenants is None else frozenset(f"{measure.TENANT_PREFIX}{slug}" for slug in tenants)
    # Runs shorter than every minimum that applies are never findings: the roll-up reader may leave them out.
    shortest = min_idle_minutes if min_idle_minutes is not None else min(
        [fleet.min_idle_minutes, *(per_tenant[t] for t in (per_tenant if tenants is None else
                                                            set(tenants) & set(per_tenant)))])
    runs, _ = rollup.idle_runs(client or billing_collect.metrics_client(), specs, start, end, options(), groups,
                               namespaces=wanted, late_allowance=late_allowance(), min_seconds=shortest * 60)
    currency = conf.BILLING_CURRENCY
    prices = _price_table(currency)
    modes = {s.name: s.mode for s in specs}
    out = []
    for run in runs:
        minimum = min_idle_minutes if min_idle_minutes is not None else per_tenant.get(
            run.tenant_slug, fleet.min_idle_minutes)
        if run.idle_seconds < minimum * 60:
            continue
        per_hour = _price(prices, run.flavor, run.start)
        # Priced as billing prices a unit: a whole GPU or MIG instance per unit-hour; a HAMi share by its
        # GPU fraction (billing's HAMi unit-seconds are share-weighted).
        unit_seconds = run.gpu_equivalent_seconds if modes.get(run.flavor) == HAMI else Decimal(run.idle_seconds)
        out.append({
            "tenant": run.tenant_slug, "namespace": run.namespace, "pod": run.pod, "container": run.container,
            "device": run.device, "mig_instance": run.mig_instance, "flavor": run.flavor,
            "start": run.start.isoformat(), "end": None if run.ongoing else run.end.isoformat(),
            "ongoing": run.ongoing, "idle_seconds": run.idle_seconds,
            "gpu_equivalent_seconds": run.gpu_equivalent_seconds.normalize(),
            "memory_mib": run.memory_mib.normalize(),
            "cost": None if per_hour is None else money(unit_seconds * per_hour / 3600),
            "currency": currency, "signal": run.signal,
        })
    return sorted(out, key=lambda f: (f["tenant"], f["start"], f["namespace"], f["pod"], f["device"]))


def utilisation(start: datetime, end: datetime, *, tenants: list[str] | None = None,
                client: RangeQuerier | None = None) -> list[dict[str, Any]]:
    """Per tenant x flavor over [start, end) (whole hours): allocated, active, efficiency, memory. The
    rolled-up hours are summed inside the TSDB (`rollup.utilisation_totals`): nothing here needs them per hour."""
    totals, _ = rollup.utilisation_totals(client or billing_collect.metrics_client(), billing_collect.flavor_specs(),
                                          start, end, options(), late_allowance=late_allowance())
    out = []
    for (tenant, flavor), (a, ga, act, gact, mem) in sorted(totals.items()):  # rollup.UTIL_FIELDS' order
        if tenants is not None and tenant not in tenants:
            continue
        out.append({"tenant": tenant, "flavor": flavor, "allocated_seconds": a, "active_seconds": act,
                    "efficiency": (act / a).quantize(Decimal("0.0001")) if a else None,
                    "allocated_gpu_equivalent_seconds": ga, "active_gpu_equivalent_seconds": gact,
                    "average_memory_mib": (mem / a).quantize(Decimal("0.1")) if a else None})
    return out


def late_allowance() -> timedelta:
    return timedelta(seconds=int(conf.FLEETOPS_LATE_SECONDS))


def rollup_window(start: datetime, end: datetime, *, now: datetime, force: bool = False,
                  client: Any = None) -> dict[str, int]:
    """Roll up the settled whole hours in [start, end) that have no final roll-up with today's settings
    and thresholds (`force`: all of them), a day per TSDB call; returns hours rolled up per kind."""
    client = client or billing_collect.metrics_client()
    opts, specs = options(), billing_collect.flavor_specs()
    groups, _ = threshold_groups(FleetSettings.current())
    done = {rollup.UTIL: 0, rollup.IDLE: 0}
    for kind, fingerprint in ((rollup.UTIL, rollup.util_fingerprint(opts, specs)),
                              (rollup.IDLE, rollup.idle_fingerprint(opts, groups))):
        cov = rollup.coverage(client, kind, fingerprint, start, end)
        for lower, upper in rollup.plan(cov, start, end, late_allowance(), force=force):
            cursor = lower
            while cursor < upper:
                day_end = min(cursor + timedelta(days=1), upper)
                if kind == rollup.UTIL:
                    done[kind] += rollup.rollup_utilisation(client, specs, cursor, day_end, opts, now)
                else:
                    done[kind] += rollup.rollup_idle(client, cursor, day_end, opts, groups, now)
                cursor = day_end
    return done


def rollup_recent(now: datetime, client: Any = None) -> dict[str, int]:
    """The periodic pass: the last GPUFLEET_FLEETOPS_ROLLUP_HOURS hours that are settled and whose roll-up
    would be final (computed at least the late allowance after the hour ended, so samples arriving up to
    then are counted; hours rolled up with older settings are redone). An hour that cannot be final yet is
    left to a later pass: reports never read a non-final roll-up, and one rolled up twice leaves its first
    rev superseded for it, which `rollup.utilisation_totals` then sums per hour range instead of in batches
    (one query per hour of a month)."""
    horizon = int(conf.FLEETOPS_ROLLUP_HOURS)
    end = min(rollup.settled_until(now, options()), rollup.floor_hour(now - late_allowance()))
    return rollup_window(end - timedelta(hours=horizon), end, now=now, client=client)


def visible_tenants(user: Any) -> list[str] | None:
    """None = every tenant (platform and billing admins: who sees every tenant's rows, tenants.models.
    sees_every_tenant); else the slugs of the caller's tenants (any number: the queries stay bounded)."""
    if sees_every_tenant(user):
        return None
    return list(Tenant.objects.for_user(user).values_list("slug", flat=True))


def flavor_queues() -> list[queues.FlavorQueues]:
    """Per flavor: Kueue resource, capacity and the ClusterQueues (tenant-<slug>) with quota in it."""
    by_flavor: dict[int, list[str]] = defaultdict(list)
    for flavor_id, slug in Quota.objects.values_list("flavor_id", "tenant__slug").order_by("tenant__slug"):
        by_flavor[flavor_id].append(cluster_queue_name(slug))
    return [queues.FlavorQueues(f.name, f.resource_name, f.capacity, tuple(by_flavor.get(f.pk, ())))
            for f in Flavor.objects.order_by("name")]


def signal_settings(fleet: FleetSettings | None = None) -> queues.SignalSettings:
    fleet = fleet or FleetSettings.current()
    return queues.SignalSettings(wait_seconds=fleet.queue_wait_seconds,
                                 allocation_ratio=Decimal(fleet.allocation_ratio))


FLEETOPS_KEY = "_fleetops"


def render_inputs() -> dict[str, Any]:
    """Render-context contribution (the registry's `platform_render_context`): the rule kind and its inputs.

    The key starts with "_": only the platform's render reads it, so the fleet pass leaves it out of the key
    it remembers tenant renders by (tenants.fleet.context_key). Its ClusterQueue list changes with every
    tenant's quota; in that key, one quota change would re-render every tenant on the next pass."""
    fleet = FleetSettings.current()
    return {FLEETOPS_KEY: {"kind": str(fleet.rule_kind), "namespace": conf.MONITORING_NAMESPACE,
                         "flavors": flavor_queues(), "signals": signal_settings(fleet)}}


def capacity_signals(at: datetime, client: Any = None) -> list[queues.Signal]:
    return queues.evaluate(client or billing_collect.metrics_client(), flavor_queues(), signal_settings(), at)
