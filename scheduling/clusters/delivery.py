"""Where rendered objects go: one tree (GitOps) or one API (Kubernetes) per host cluster.

`placed_for_tenant` and `platform_targets` are the hooks tenants.render calls: pure functions of the render
inputs (the clusters with their catalogs in the render context (scheduling.context), the tenant's placements and
per-cluster quotas in TenantView.scheduling). `record_placement` and `record_platform` write how
delivery to one cluster went (tenants.reconcile calls them): the placement's `Reconciled` condition and the
cluster's reachability -- an unreachable cluster marks its own tenants' placements, nobody else's.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any

from gpufleet import clock
from gpufleet.bulk import update_rows
from infra.errors import InfraError, TransientError
from scheduling import context
from scheduling.clusters import placement
from scheduling.clusters.models import DEFAULT_CLUSTER
from scheduling.inputs import ClusterSpec, scheduling_of
from tenants.render import Placed, RenderContext, TenantView

log = logging.getLogger(__name__)

RECONCILED = "Reconciled"
REMOVED = "the placement was removed"


def clusters_of(ctx: RenderContext) -> dict[str, ClusterSpec]:
    specs = context.cluster_specs_in(ctx)
    if not specs:  # a context built without the catalog loader (pure tests): one default cluster, root layout
        return {DEFAULT_CLUSTER: ClusterSpec(DEFAULT_CLUSTER, "", catalog=context.catalog_in(ctx))}
    return {c.name: c for c in specs}


# Key in RenderContext.extra of the per-cluster contexts derived from it: built once per context (a fleet pass
# renders a thousand tenants with one), so every tenant on a cluster shares that cluster's context object.
_DERIVED = "_per_cluster"


def context_on(ctx: RenderContext, cluster: ClusterSpec) -> RenderContext:
    """The platform-wide render inputs as one cluster sees them (its flavors and node pools)."""
    derived = ctx.extra.setdefault(_DERIVED, {})
    if cluster.name not in derived:
        extra = context.narrowed({k: v for k, v in ctx.extra.items() if k != _DERIVED}, cluster=cluster.name,
                                 catalog=cluster.catalog)
        derived[cluster.name] = replace(ctx, extra=extra)
    return derived[cluster.name]  # type: ignore[no-any-return]


def facts(cluster: ClusterSpec) -> placement.ClusterFacts:
    return placement.ClusterFacts(cluster.name, cluster.purpose, cluster.region, cluster.trust_levels)


def placed_for_tenant(view: TenantView, ctx: RenderContext) -> list[Placed]:
    clusters = clusters_of(ctx)
    sched = scheduling_of(view)
    rows = (sched.placements if sched and sched.placements else ((DEFAULT_CLUSTER, True),))
    known = [(clusters[name], home) for name, home in rows if name in clusters]
    if not known:  # placed only on clusters that no longer exist: keep the tenant on default
        known = [(next(iter(clusters.values())), True)]
    targets = placement.targets([(facts(c), c.tree, home) for c, home in known], view.trust_level)
    # Removed placements: nothing is rendered there, so the apply prunes what the tenant had on that cluster.
    targets += [placement.Target(name, clusters[name].tree, False, REMOVED)
                for name in (sched.leaving if sched else ()) if name in clusters]
    out = []
    for target in targets:
        cluster = clusters[target.cluster]
        narrowed = replace(view, home=target.home, cluster=target.cluster,
                           scheduling=sched.on(target.cluster, target.home) if sched is not None else None)
        out.append(Placed(target.cluster, target.tree, narrowed, context_on(ctx, cluster),
                          home=target.home, refused=target.refused))
    return out


def platform_targets(ctx: RenderContext) -> list[Placed]:
    return [Placed(c.name, c.tree, None, context_on(ctx, c)) for c in clusters_of(ctx).values()]


def _condition(error: InfraError | None, refused: str) -> dict[str, str]:
    if refused:
        status, reason, message = "False", "TrustNotAllowed", refused
    elif error is None:
        status, reason, message = "True", "Applied", "the tenant's objects are applied on this cluster"
    else:
        status = "False"
        reason = "ClusterUnreachable" if isinstance(error, TransientError) else (error.reason or "ApplyFailed")
        message = str(error)
    return {"type": RECONCILED, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": clock.now().isoformat()}


@dataclass
class _Chunk:
    """A fleet pass's chunk of tenants (`placement_chunk`): their placement rows loaded at once, and the
    status writes made for them, flushed in one statement per kind of write when the chunk ends."""

    rows: dict[tuple[int, str], Any]  # (tenant id, cluster name) -> Placement (conditions, cluster_id)
    writes: dict[int, dict[str, Any]] = field(default_factory=dict)  # placement pk -> fields


_CHUNK: ContextVar[_Chunk | None] = ContextVar("placement_chunk", default=None)


@contextmanager
def placement_chunk(tenants: list[Any]) -> Iterator[None]:
    """The registry's `chunk_scope`: inside, `record_placement` for these tenants reads their preloaded
    rows and defers its UPDATE; one UPDATE per set of fields (`gpufleet.bulk.update_rows`) writes them when
    the chunk ends (its commit made): two queries a chunk instead of two per tenant and cluster. Writes are
    flushed even if the chunk failed part-way, as each was recorded for an apply that happened."""
    from scheduling.clusters.models import Placement

    rows = Placement.objects.filter(tenant_id__in=[t.pk for t in tenants]).select_related("cluster").only(
        "tenant_id", "conditions", "cluster_id", "cluster__name")
    chunk = _Chunk({(row.tenant_id, row.cluster.name): row for row in rows})
    token = _CHUNK.set(chunk)
    try:
        yield
    finally:
        _CHUNK.reset(token)
        by_fields: dict[tuple[str, ...], dict[int, dict[str, Any]]] = {}
        for pk, fields in chunk.writes.items():
            by_fields.setdefault(tuple(sorted(fields)), {})[pk] = fields
        try:
            for names, rows in by_fields.items():  # one UPDATE each (bulk_update's CASE per row was ~1 ms a row)
                update_rows(Placement, rows, names)
        except Exception:  # status only: the tenants' applies and commit stand; the next apply rewrites it
            log.exception("recording the placement status of %d placements failed", len(chunk.writes))


def record_placement(tenant: Any, placed: Placed, error: InfraError | None) -> None:
    """The registry's `placement_status`: the placement's condition (the time moves only when the
    status or reason does) and the cluster's reachability."""
    from scheduling.clusters.models import Placement

    chunk = _CHUNK.get()
    row = chunk.rows.get((tenant.pk, placed.cluster)) if chunk is not None else None
    if row is None:
        chunk = None  # not preloaded (a placement added meanwhile): the row as it is now, written now
        rows = Placement.objects.filter(tenant_id=tenant.pk, cluster__name=placed.cluster)
        row = rows.only("conditions", "cluster_id").first()
    if row is not None and placed.refused == REMOVED:
        if chunk is not None:
            chunk.rows.pop((tenant.pk, placed.cluster), None)
            chunk.writes.pop(row.pk, None)
        if error is None:  # pruned there: the cluster forgets the tenant
            Placement.objects.filter(pk=row.pk).delete()
    elif row is not None:
        new = _condition(error, placed.refused)
        old = row.condition(RECONCILED)
        if old and (old.get("status"), old.get("reason")) == (new["status"], new["reason"]):
            new["lastTransitionTime"] = old.get("lastTransitionTime", new["lastTransitionTime"])
        conditions = [c for c in row.conditions if c.get("type") != RECONCILED] + [new]
        fields: dict[str, Any] = {"conditions": conditions}
        if error is None:
            fields["last_reconciled_at"] = clock.now()
        if chunk is not None:
            row.conditions = conditions  # a second record in this chunk merges with this one
            chunk.writes[row.pk] = {**chunk.writes.get(row.pk, {}), **fields}
        else:
            Placement.objects.filter(pk=row.pk).update(**fields)
    _cluster_status(placed.cluster, error, row.cluster_id if row is not None else None)


# Cluster rows this process last marked reachable, and when (monotonic seconds): a fleet pass applies a thousand
# tenants to a few clusters, and one write per cluster per interval says as much as a thousand.
_MARKED_REACHABLE: dict[tuple[str, int], float] = {}
REACHABLE_REFRESH_S = 30.0


def record_platform(target: Placed, error: InfraError | None) -> None:
    _cluster_status(target.cluster, error, None)


def _cluster_status(name: str, error: InfraError | None, cluster_id: int | None) -> None:
    """`cluster_id` given: a tenant's placement, throttled per cluster row (see _MARKED_REACHABLE)."""
    from scheduling.clusters.models import Cluster

    if error is None:
        now = time.monotonic()
        key = (name, cluster_id or 0)
        if cluster_id and now - _MARKED_REACHABLE.get(key, -REACHABLE_REFRESH_S) < REACHABLE_REFRESH_S:
            return
        Cluster.objects.filter(name=name).update(reachable=True, last_sync_at=clock.now(), status_message="")
        _MARKED_REACHABLE[key] = now
        return
    for key in [k for k in _MARKED_REACHABLE if k[0] == name]:
        _MARKED_REACHABLE.pop(key)
    if isinstance(error, TransientError):
        Cluster.objects.filter(name=name).update(reachable=False, status_message=str(error)[:2000])
    else:
        Cluster.objects.filter(name=name).update(reachable=True, status_message=str(error)[:2000])


def kube_clusters() -> tuple[list[tuple[str, str, str, str]], str]:
    """The registry's `kube_clusters`: every cluster's API reference; `default` is where gpufleet runs
    (its empty reference means GPUFLEET_KUBECONFIG or the pod's service account)."""
    from scheduling.clusters.models import Cluster, default_cluster_id

    default_cluster_id()
    rows = [(c.name, c.tree, c.kube_api, c.kubeconfig_secret) for c in Cluster.objects.all()]
    local = next((tree for name, tree, _, _ in rows if name == DEFAULT_CLUSTER), "")
    return rows, local


def kubeconfig_placements(tenant: Any) -> list[tuple[str, bool]]:
    """The registry's `kubeconfig_placements`: (cluster, home) for each placement that runs the
    tenant's vCluster -- not one the cluster refuses for the tenant's trust level (nothing is rendered there)."""
    from scheduling.clusters.models import Placement

    rows = Placement.objects.filter(tenant_id=tenant.pk).select_related("cluster").order_by("cluster__name")
    return [(p.cluster.name, p.home) for p in rows if p.cluster.allows_trust(tenant.trust_level)]


def reserved_pools_values(view: TenantView, ctx: RenderContext, values: dict[str, Any]) -> None:
    """The registry's `vcluster_values`: pods the tenant's vCluster syncs tolerate the node pools of its home
    cluster reserved for its trust level -- and no others (pure; nothing added when no pool is reserved)."""
    from scheduling.nodepools.render import reserved_pool_tolerations

    cat = context.catalog_in(ctx)
    tolerations = reserved_pool_tolerations(view.trust_level, cat) if cat is not None else []
    if tolerations:
        pods = values.setdefault("sync", {}).setdefault("toHost", {}).setdefault("pods", {})
        pods["enforceTolerations"] = sorted({*pods.get("enforceTolerations", []), *tolerations})
