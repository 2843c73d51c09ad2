"""MultiKueue mode in the per-cluster render (GPUFLEET_MULTIKUEUE; off by default, and then nothing here
changes a rendered object).

- `context_extras` (the registry's `render_context`): whether the mode is on, as a render input.
- `wrap` (the registry's `placement_wrappers`) wraps the placement contributor (scheduling.clusters.delivery.
  placed_for_tenant): each of a tenant's placements gets a `Dispatch` as its view's `dispatch` -- is it the
  home, which clusters are its workers, and the tenant's quotas per cluster (the per-cluster view alone only
  carries that cluster's quotas).
- the `multikueue` tenant section renders scheduling.clusters.multikueue's manager objects on the home cluster and the
  worker LocalQueue on every other placement. Pure, like every section.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from gpufleet.core import conf
from infra.manifests import Manifest
from scheduling.clusters import multikueue
from scheduling.inputs import QuotaSpec, TenantScheduling
from scheduling.render import allowed_flavors, catalog_of, scheduling_of
from tenants.render import Placed, RenderContext, TenantView

KEY = "multikueue"


@dataclass(frozen=True)
class Dispatch:
    home: bool
    cluster: str
    workers: tuple[str, ...]
    quotas_by_cluster: dict[str, dict[str, QuotaSpec]] = field(default_factory=dict)


def context_extras() -> dict[str, Any]:
    return {KEY: bool(conf.MULTIKUEUE)}


def dispatching(placed: list[Placed], sched: TenantScheduling | None) -> list[Placed]:
    """`placed` with a Dispatch on each view when the tenant has a home and at least one other placement."""
    if sched is None:
        return placed
    live = [p for p in placed if not p.refused and p.view is not None]
    homes = [p for p in live if p.home]
    # Workers in the order placements come (home first, then by cluster name): the dispatcher's preference.
    workers = tuple(p.cluster for p in live if not p.home)[:multikueue.MAX_WORKERS]
    if len(homes) != 1 or not workers:
        return placed
    quotas = sched.by_cluster or {homes[0].cluster: sched.quotas}
    out = []
    for p in placed:
        if p.view is None or p.refused:
            out.append(p)
            continue
        info = Dispatch(home=p.home, cluster=p.cluster, workers=workers, quotas_by_cluster=quotas)
        out.append(replace(p, view=replace(p.view, dispatch=info)))
    return out


def wrap(inner: Callable[[TenantView, RenderContext], list[Placed]]) -> Callable[..., list[Placed]]:
    def placed_with_dispatch(view: TenantView, ctx: RenderContext) -> list[Placed]:
        placed = inner(view, ctx)
        if not ctx.extra.get(KEY):
            return placed
        return dispatching(placed, scheduling_of(view))

    return placed_with_dispatch


def render_tenant_multikueue(view: TenantView, ctx: RenderContext) -> list[Manifest]:
    info = view.dispatch if isinstance(view.dispatch, Dispatch) else None
    sched = scheduling_of(view)
    if info is None or sched is None:
        return []
    if not info.home:
        return multikueue.worker_tenant_objects(view)
    flavors = allowed_flavors(view, catalog_of(ctx), sched)
    workers = [multikueue.Worker(name) for name in info.workers]
    return multikueue.manager_tenant_objects(view, info.cluster, workers, flavors, info.quotas_by_cluster)
