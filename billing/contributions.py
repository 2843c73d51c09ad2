"""What billing adds at the registry's extension points (gpufleet.core.registry)."""

from __future__ import annotations

from gpufleet.core.registry import Contribution

from . import demo

CONTRIBUTIONS: tuple[Contribution, ...] = (
    Contribution("demo_seeder", demo.seed_billing, order=500),  # the demo's prices and usage (after its catalog)
)
