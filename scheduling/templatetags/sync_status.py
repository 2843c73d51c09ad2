"""`{% sync_status %}`: the fleet's latest sync run, rendered by scheduling/_sync_status.html."""

from __future__ import annotations

from typing import Any

from django import template

register = template.Library()


@register.inclusion_tag("scheduling/_sync_status.html")
def sync_status() -> dict[str, Any]:
    from scheduling.sync import latest

    return {"sync_run": latest()}
