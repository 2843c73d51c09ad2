"""Adapters from the platform's database to simulator scenarios (the simulator core stays Django-free).

* `fleet_scenario` -- flavors, node pools, cohorts, tenants and quotas, and the policies the platform
  renders (Kueue preemption as in scheduling/render.py, fair-sharing weights, gang placement by KAI).
* `recorded_jobs` -- the last N days of billing's hourly usage, reconstructed into jobs
  (scheduling.simulator.replay.reconstruct_jobs).
* `with_quota` -- the same scenario with one tenant's quota replaced (what a quota request proposes).
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import F, Q

from billing.models import Price, UsageRecord
from gpufleet import clock
from gpufleet.core import conf
from scheduling.catalog import rules as catalog
from scheduling.models import Cohort, Flavor, GpuNodePool, InferenceEndpoint, Quota, TenantScheduling
from scheduling.simulator.replay import reconstruct_jobs
from tenants.models import Tenant

MIG_SLICES = {"1g": 7, "2g": 3, "3g": 2, "4g": 1, "7g": 1}
DEFAULT_GPUS_PER_NODE = 8
_DURATION = re.compile(r"^(\d+)(s|m|h)$")


def slices_per_gpu(flavor: Flavor) -> int:
    if flavor.mode == catalog.MIG:
        return MIG_SLICES.get(flavor.mig_profile.split(".")[0], 1)
    if flavor.mode == catalog.HAMI:
        share = flavor.cores_percent or flavor.memory_percent or 100
        return max(1, 100 // share)
    return 1


def gpus_per_node(pool: GpuNodePool) -> int:
    """The pool's GPUs per node where the model records it (issue 15's `gpus_per_node`), else 8."""
    return int(getattr(pool, "gpus_per_node", DEFAULT_GPUS_PER_NODE) or DEFAULT_GPUS_PER_NODE)


def seconds(text: str) -> float:
    """Karpenter's consolidateAfter ("30s", "10m", "1h"; "Never" never consolidates)."""
    match = _DURATION.match(text.strip())
    if not match:
        return 10 * 365 * 86400.0
    value, unit = int(match.group(1)), match.group(2)
    return float(value * {"s": 1, "m": 60, "h": 3600}[unit])


def node_price(flavor: Flavor, currency: str, at: datetime, gpus: int = DEFAULT_GPUS_PER_NODE,
               cluster_id: int | None = None) -> Decimal:
    """A node-hour at the flavor's current unit-hour price: the cost figure uses what tenants are billed.
    On a given cluster its own price wins over the every-cluster price, as on invoices."""
    prices = (Price.objects.filter(flavor=flavor, currency=currency, effective_from__lte=at)
              .filter(Q(effective_to__isnull=True) | Q(effective_to__gt=at)))
    prices = prices.filter(Q(cluster__isnull=True) | Q(cluster_id=cluster_id)) if cluster_id else prices.filter(
        cluster__isnull=True)
    # The cluster's own price (cluster_id set) before the every-cluster one (NULL), then the newest.
    price = prices.order_by(F("cluster_id").desc(nulls_last=True), "-effective_from").first()
    if price is None:
        return Decimal(0)
    return price.per_unit_hour * slices_per_gpu(flavor) * gpus


def fleet_scenario(days: float = 7, *, currency: str = "USD", with_demand: bool = True) -> dict[str, Any]:
    now = clock.now()
    flavors = list(Flavor.objects.select_related("gpu_model").order_by("name"))
    pools: list[dict[str, Any]] = []
    pooled = set()
    for pool in GpuNodePool.objects.select_related("flavor").order_by("name"):
        pooled.add(pool.flavor_id)
        per_node = gpus_per_node(pool)
        gpus = min(pool.gpu_limit, max(pool.flavor.capacity // slices_per_gpu(pool.flavor), 0) or pool.gpu_limit)
        pools.append({"name": pool.name, "flavor": pool.flavor.name, "gpus_per_node": per_node,
                      "nodes": gpus // per_node, "gpu_limit": pool.gpu_limit, "provisioner": "karpenter",
                      "consolidation_policy": pool.consolidation_policy,
                      "consolidate_after_s": seconds(pool.consolidate_after),
                      "price_per_node_hour": str(node_price(pool.flavor, currency, now, per_node, pool.cluster_id))})
    for flavor in flavors:
        if flavor.pk in pooled or flavor.capacity <= 0:
            continue  # a fixed fleet: the flavor's capacity, on static nodes
        gpus = math.ceil(flavor.capacity / slices_per_gpu(flavor))
        pools.append({"name": f"{flavor.name}-static", "flavor": flavor.name, "gpus_per_node": DEFAULT_GPUS_PER_NODE,
                      "nodes": math.ceil(gpus / DEFAULT_GPUS_PER_NODE), "provisioner": "none",
                      "price_per_node_hour": str(node_price(flavor, currency, now))})
    served = {p["flavor"] for p in pools}
    cohorts = [{"name": c.name, "parent": c.parent.name if c.parent else None, "weight": float(c.fair_sharing_weight)}
               for c in Cohort.objects.select_related("parent").order_by("name")]
    scheds = {s.tenant_id: s for s in TenantScheduling.objects.select_related("cohort")}
    tenants = []
    for tenant in Tenant.objects.exclude(phase__in=["deleted", "rejected"]).order_by("slug"):
        sched = scheds.get(tenant.pk)
        quotas = [{"flavor": q.flavor.name, "nominal": q.nominal, "borrowing_limit": q.borrowing_limit,
                   "lending_limit": q.lending_limit}
                  for q in Quota.objects.filter(tenant=tenant).select_related("flavor").order_by("flavor__name")
                  if q.flavor.name in served]
        tenants.append({"name": tenant.slug, "cohort": sched.cohort.name if sched and sched.cohort else None,
                        "weight": float(sched.fair_sharing_weight) if sched else 1.0, "quotas": quotas})
    scenario: dict[str, Any] = {
        "name": "fleet", "days": days, "currency": currency,
        "fleet": {"flavors": [{"name": f.name, "mode": f.mode, "slices_per_gpu": slices_per_gpu(f)}
                              for f in flavors if f.name in served],
                  "node_pools": pools or [{"name": "empty", "flavor": "none", "provisioner": "none"}]},
        "cohorts": cohorts, "tenants": tenants,
        # Kueue's fair sharing follows the platform's setting where it exists (issue 15 adds
        # GPUFLEET_KUEUE_FAIR_SHARING); before it, any cohort meant fair-sharing weights were rendered.
        "policies": {"gang": True,
                     "fair_sharing": bool(conf.KUEUE_FAIR_SHARING),
                     "preemption": {"reclaim_within_cohort": "Any", "borrow_within_cohort": "LowerPriority",
                                    "within_cluster_queue": "LowerPriority"}},
    }
    if with_demand:
        scenario["jobs"] = recorded_jobs(days, served_flavors=served, tenants={t["name"] for t in tenants})
    return scenario


def recorded_jobs(days: float, *, served_flavors: set[str], tenants: set[str]) -> list[dict[str, Any]]:
    """The last `days` whole days of hourly usage (ending at the start of the current UTC hour), as jobs."""
    end = clock.now().replace(minute=0, second=0, microsecond=0)
    start = end - timedelta(hours=math.ceil(days * 24))
    rows = (UsageRecord.objects.filter(hour__gte=start, hour__lt=end).select_related("tenant", "flavor")
            .order_by("tenant__slug", "flavor__name", "hour"))
    data = [(r.tenant.slug, r.flavor.name, int((r.hour - start).total_seconds() // 3600), r.unit_seconds)
            for r in rows if r.flavor.name in served_flavors and r.tenant.slug in tenants]
    return reconstruct_jobs(data)


def with_quota(scenario: dict[str, Any], tenant: str, flavor: str, nominal: int, borrowing_limit: int | None,
               lending_limit: int | None) -> dict[str, Any]:
    """A copy of `scenario` where `tenant` has the given quota on `flavor` (added if it had none)."""
    import copy

    out = copy.deepcopy(scenario)
    for t in out["tenants"]:
        if t["name"] != tenant:
            continue
        quota = {"flavor": flavor, "nominal": nominal, "borrowing_limit": borrowing_limit,
                 "lending_limit": lending_limit}
        t["quotas"] = [q for q in t["quotas"] if q["flavor"] != flavor] + [quota]
    return out


def endpoint_traffic(endpoint: InferenceEndpoint, flavor: Flavor, days: float, rps_per_unit: float) -> list[float]:
    """Hourly requests/s for an endpoint, from its tenant's recorded hourly usage of `flavor` (the platform
    does not store request counts; GPU use is the proxy: units in use x what one unit serves)."""
    end = clock.now().replace(minute=0, second=0, microsecond=0)
    hours = math.ceil(days * 24)
    start = end - timedelta(hours=hours)
    series = [0.0] * hours
    for row in UsageRecord.objects.filter(tenant=endpoint.tenant, flavor=flavor, hour__gte=start, hour__lt=end):
        # += : one row per cluster the tenant is placed on, for the same hour.
        series[int((row.hour - start).total_seconds() // 3600)] += float(row.unit_seconds) / 3600 * rps_per_unit
    return series


def endpoint_scenario(endpoint: InferenceEndpoint, *, days: float, hourly_rps: list[float], units_per_replica: int,
                      capacity_rps: float, pool: GpuNodePool | None = None) -> dict[str, Any]:
    """One endpoint alone on its node pool, with its tier's settings and the given hourly traffic."""
    if pool is None:
        flavors = Quota.objects.filter(tenant=endpoint.tenant).values_list("flavor_id", flat=True)
        pool = GpuNodePool.objects.select_related("flavor").filter(flavor_id__in=list(flavors)).order_by("name").first()
    if pool is None:
        raise ValueError(f"tenant {endpoint.tenant.slug} has no quota on a flavor with a node pool")
    tier = endpoint.tier
    prewarm = []
    if tier.prewarm_start and tier.prewarm_end:
        # KEDA cron "m h * * *": only the hour fields are used (the simulator's day is UTC).
        start_h, end_h = (int(c.split()[1]) for c in (tier.prewarm_start, tier.prewarm_end))
        prewarm = [{"start_hour": start_h, "end_hour": end_h, "replicas": tier.prewarm_replicas}]
    return {
        "name": f"plan-{endpoint.tenant.slug}-{endpoint.name}", "days": days,
        "fleet": {"flavors": [{"name": pool.flavor.name, "mode": pool.flavor.mode,
                               "slices_per_gpu": slices_per_gpu(pool.flavor)}],
                  "node_pools": [{"name": pool.name, "flavor": pool.flavor.name, "gpus_per_node": gpus_per_node(pool),
                                  "nodes": 1, "gpu_limit": pool.gpu_limit, "provisioner": "karpenter",
                                  "consolidation_policy": pool.consolidation_policy,
                                  "consolidate_after_s": seconds(pool.consolidate_after),
                                  "price_per_node_hour": str(node_price(pool.flavor, "USD", clock.now(),
                                                                        gpus_per_node(pool), pool.cluster_id))}]},
        "tenants": [{"name": endpoint.tenant.slug}],
        "endpoints": [{"name": endpoint.name.lower(), "tenant": endpoint.tenant.slug, "pool": pool.name,
                       "gpus_per_pod": units_per_replica, "pods_per_replica": 1, "min_replicas": tier.min_replicas,
                       "max_replicas": max(1, tier.max_replicas), "cooldown_s": tier.cooldown_seconds,
                       "polling_s": max(10, tier.polling_seconds), "signal": "queue-depth",
                       "target": endpoint.queue_target, "capacity_rps": capacity_rps, "prewarm": prewarm,
                       "traffic": {"hourly_rps": hourly_rps}}],
    }
