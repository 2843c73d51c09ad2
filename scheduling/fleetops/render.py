"""The capacity-signal alerting rules as part of the platform's output (pure, from the render context)."""

from __future__ import annotations

from typing import Any

from scheduling import context
from scheduling.clusters.models import DEFAULT_CLUSTER
from tenants.render import RenderContext, platform_metadata

from ..render import catalog_of
from .queues import SignalSettings, rule_object
from .service import FLEETOPS_KEY


def rule_cluster(ctx: RenderContext) -> str | None:
    """The cluster that carries the fleet-wide rules: `default` (where gpufleet runs) if it is a host cluster,
    else the first by name; None for the single root layout (no clusters)."""
    names = sorted(c.name for c in context.cluster_specs_in(ctx))
    if not names:
        return None
    return DEFAULT_CLUSTER if DEFAULT_CLUSTER in names else names[0]


def capacity_rules_rendered(ctx: RenderContext) -> bool:
    """The rules read Kueue's metrics, which are scraped only through the ServiceMonitor Kueue's chart renders
    with GPUFLEET_PROMETHEUS_OPERATOR (the VictoriaMetrics operator converts it too). Without it the rule
    could never fire, and its own CRD (PrometheusRule, or VMRule) is not a promised prerequisite: rendered
    anyway, it failed the whole configs stage on a cluster without that CRD and every tenant behind it
    (issue 26 review, N2). The portal still evaluates the same signals itself when the metrics are there."""
    return bool(catalog_of(ctx).prometheus_operator)


def render_capacity_rules(ctx: RenderContext) -> list[dict[str, Any]]:
    """The rules are fleet-wide: every flavor's capacity against every ClusterQueue with quota in it. Rendered
    into each cluster's tree, each cluster's ruler would fire the same alert again (one metrics store behind
    GPUFLEET_METRICS_URL) or compare its own usage with the whole fleet's capacity (one store per cluster).
    So they go to one cluster only (rule_cluster)."""
    inputs = ctx.extra.get(FLEETOPS_KEY)
    if not inputs or not inputs["flavors"]:
        return []
    if not capacity_rules_rendered(ctx):
        return []
    if context.cluster_name_in(ctx) not in (None, rule_cluster(ctx)):
        return []
    meta = platform_metadata("gpufleet-capacity", inputs["namespace"])
    manifest = rule_object(inputs["kind"], inputs["namespace"], inputs["flavors"], inputs["signals"], meta["labels"])
    return [manifest]


__all__ = ["SignalSettings", "render_capacity_rules"]
