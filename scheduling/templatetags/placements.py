"""`{% tenant_placements tenant %}`: the clusters a tenant is placed on (home first), its open placement
requests, rendered by scheduling/_placements.html on the tenant's pages."""

from __future__ import annotations

from typing import Any

from django import template

register = template.Library()


@register.inclusion_tag("scheduling/_placements.html")
def tenant_placements(tenant: Any) -> dict[str, Any]:
    from scheduling.models_clusters import Placement, PlacementChangeRequest

    return {
        "tenant": tenant,
        "placements": Placement.objects.filter(tenant=tenant).select_related("cluster"),
        "open_requests": PlacementChangeRequest.objects.filter(
            tenant=tenant, state=PlacementChangeRequest.State.PENDING).select_related("cluster"),
    }
