"""What fleet operations add at the registry's extension points (gpufleet.core.registry)."""

from __future__ import annotations

from gpufleet.core.registry import Contribution

from . import render, service

CONTRIBUTIONS: tuple[Contribution, ...] = (
    # Only the platform's capacity rules read it (every tenant's ClusterQueue): not loaded per tenant.
    Contribution("platform_render_context", service.render_inputs, order=350),
    Contribution("platform_section", render.render_capacity_rules, order=350, name="fleetops"),
)
