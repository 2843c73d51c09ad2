"""The GPU figures the portal shows, each defined once (issue 28: "one figure per fact").

Per flavor, in its units (GPUs, MIG instances or shares):

- **installed**: the inventory entered for the flavor (`Flavor.capacity`, the sum over the clusters' offers);
- **pool headroom**: what the flavor's Karpenter node pools may still add (their GPU limits x units per GPU);
- **schedulable**: installed + pool headroom, what quotas are checked against (x the overcommit factor);
- **sold**: nominal quota held by tenants that still hold capacity (`actions.held_quota`: a tenant being torn
  down or gone releases its share);
- **in use now**: average units held during the newest measured hour of stored usage (billing's
  `allocation_now`), per tenant or fleet-wide.

Every page that shows one of these takes it from here and labels it with `LABELS`; the templates mark each with
`data-figure="<name>" data-flavor="<flavor>"` so tests/portal/test_figures.py can check that pages agree.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Sum
from django.db.models.functions import Coalesce

from scheduling.catalog import rules as catalog
from tenants.models import Tenant

from .actions import RELEASED_PHASES
from .models import Flavor, Quota

LABELS = {
    "installed": "Installed",
    "pool_headroom": "Pool headroom",
    "schedulable": "Schedulable (incl. pool headroom)",
    "sold": "Quota sold",
    "in_use": "In use now",
}


@dataclass(frozen=True)
class FlavorFigures:
    flavor: str
    installed: int
    pool_headroom: int
    sold: int

    @property
    def schedulable(self) -> int:
        return self.installed + self.pool_headroom


def pool_headroom(flavor: Flavor, pool_gpus: int) -> int:
    """Pure: the units a flavor's pools may add, given the sum of their GPU limits."""
    return pool_gpus * catalog.units_per_gpu(flavor.weight)


def flavor_figures(flavors: object = None) -> dict[str, FlavorFigures]:
    """Installed, pool headroom and sold per flavor name, in two queries (`flavors`: a Flavor queryset,
    default all)."""
    rows = (Flavor.objects.all() if flavors is None else flavors).annotate(  # type: ignore[attr-defined]
        pool_gpus=Coalesce(Sum("node_pools__gpu_limit"), 0))
    released = Tenant.objects.filter(phase__in=RELEASED_PHASES).values("pk")
    sold = dict(Quota.objects.exclude(tenant__in=released).values_list("flavor_id")
                .annotate(n=Sum("nominal")).order_by())
    return {f.name: FlavorFigures(f.name, f.capacity, pool_headroom(f, f.pool_gpus), sold.get(f.pk, 0) or 0)
            for f in rows}
