"""`{% tenant_placements tenant %}`: the clusters a tenant is placed on (home first), its open placement
requests, rendered by scheduling/_placements.html on the tenant's pages."""

from __future__ import annotations

from typing import Any

from django import template

register = template.Library()


@register.inclusion_tag("scheduling/_placements.html")
def tenant_placements(tenant: Any, with_requests: bool = True) -> dict[str, Any]:
    """One query for the placements (with their clusters); one more for open requests when asked."""
    from scheduling.clusters.models import Placement, PlacementChangeRequest

    requests = PlacementChangeRequest.objects.filter(
        tenant=tenant, state=PlacementChangeRequest.State.PENDING).select_related("cluster")
    return {
        "tenant": tenant,
        "placements": list(Placement.objects.filter(tenant=tenant).select_related("cluster")),
        "open_requests": list(requests) if with_requests else [],
    }
