"""The capacity-signal alerting rules as part of the platform's output (pure, from the render context)."""

from __future__ import annotations

from typing import Any

from tenants.render import RenderContext, platform_metadata, platform_section

from .queues import SignalSettings, rule_object
from .service import FLEETOPS_KEY


@platform_section("fleetops")
def render_capacity_rules(ctx: RenderContext) -> list[dict[str, Any]]:
    inputs = ctx.extra.get(FLEETOPS_KEY)
    if not inputs or not inputs["flavors"]:
        return []
    meta = platform_metadata("gpufleet-capacity", inputs["namespace"])
    manifest = rule_object(inputs["kind"], inputs["namespace"], inputs["flavors"], inputs["signals"], meta["labels"])
    return [manifest]


__all__ = ["SignalSettings", "render_capacity_rules"]
