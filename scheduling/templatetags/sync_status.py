"""`{% sync_status %}`: the fleet's latest sync run, rendered by scheduling/_sync_status.html."""

from __future__ import annotations

from typing import Any

from django import template

from gpufleet.core import conf

register = template.Library()


@register.inclusion_tag("scheduling/_sync_status.html")
def sync_status() -> dict[str, Any]:
    from scheduling.clusters.sync import latest

    return {"sync_run": latest()}


@register.simple_tag
def sync_schedule() -> str:
    """Why no fleet sync has run, in this deployment's terms: Celery beat runs it every
    GPUFLEET_SYNC_FLEET_SECONDS; the embedded demo (tasks run in-process) has no beat for it, only a timer for
    reconcile_all, so there it never runs by itself."""
    from django.conf import settings

    every = int(conf.SYNC_FLEET_SECONDS)
    if settings.CELERY_TASK_ALWAYS_EAGER:
        return ("The embedded demo does not run it (its in-process timer reconciles tenants every "
                f"{int(conf.RECONCILE_ALL_SECONDS)} s); a deployment's Celery beat runs it every "
                f"{every // 60} min.")
    return f"Celery beat runs it every {every // 60} min; if this stays, check that beat is running."
