"""Scheduling's inputs in a RenderContext: the one place that knows their keys in `ctx.extra`.

`RenderContext.extra` is `tenants`' open dict for what other apps' `render_context` contributors load
(tenants cannot name scheduling's types). Scheduling writes three entries there and reads them only through
these accessors, so no other module spells a key:

- the GPU catalog as the context's cluster sees it (scheduling.inputs.Catalog; the fleet-wide one until
  `clusters.delivery.context_on` narrows the context to one cluster),
- every host cluster with its own catalog (clusters.delivery.ClusterSpec; empty for the root layout),
- the name of the cluster a narrowed context is for (None for the fleet-wide one).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tenants.render import RenderContext

CATALOG = "scheduling"
CLUSTERS = "clusters"
CLUSTER = "cluster"


def entries(catalog: Any, clusters: Sequence[Any]) -> dict[str, Any]:
    """What the catalog loader contributes (scheduling.inputs.load_catalog)."""
    return {CATALOG: catalog, CLUSTERS: clusters}


def catalog_in(ctx: RenderContext) -> Any | None:
    """The context's catalog, None when it was built without the catalog loader (pure tests)."""
    return ctx.extra.get(CATALOG)


def cluster_specs_in(ctx: RenderContext) -> Sequence[Any]:
    """Every host cluster with its catalog (empty: the single root layout)."""
    return ctx.extra.get(CLUSTERS) or ()


def cluster_name_in(ctx: RenderContext) -> str | None:
    """The cluster a per-cluster context is for; None for the fleet-wide context."""
    return ctx.extra.get(CLUSTER)


def narrowed(extra: dict[str, Any], *, cluster: str, catalog: Any | None) -> dict[str, Any]:
    """`extra` as one cluster sees it: its own catalog (when it has one) and its name."""
    out = dict(extra)
    if catalog is not None:
        out[CATALOG] = catalog
    out[CLUSTER] = cluster
    return out
