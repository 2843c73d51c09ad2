"""The fleet-wide capacity rules (scheduling.fleetops) are rendered into one cluster's tree, not every one's:
each copy would be evaluated by a ruler and fire the same alert again, or compare one cluster's usage with
the whole fleet's capacity."""

from __future__ import annotations

import pytest

from tenants.render import RenderContext, platform_targets, render_platform

pytestmark = pytest.mark.django_db


def rules_per_cluster() -> dict[str, int]:
    ctx = RenderContext.from_settings()
    return {t.cluster: sum(m["kind"] in ("VMRule", "PrometheusRule") for m in render_platform(t.ctx))
            for t in platform_targets(ctx)}


def test_capacity_rules_are_rendered_once_for_the_fleet(three_clusters, settings) -> None:
    settings.GPUFLEET_PROMETHEUS_OPERATOR = True
    assert rules_per_cluster() == {"dev": 1, "inference": 0, "training": 0}


def test_without_kueues_scrape_no_capacity_rule_is_rendered(three_clusters, settings) -> None:
    """Issue 26 review N2: at the shipped default (GPUFLEET_PROMETHEUS_OPERATOR off) Kueue is not scraped, so the
    rule could never fire, and its CRD is no promised prerequisite: rendered anyway, a cluster without it failed
    its whole configs stage, and the tenants stage behind it never applied."""
    settings.GPUFLEET_PROMETHEUS_OPERATOR = False
    assert rules_per_cluster() == {"dev": 0, "inference": 0, "training": 0}


def test_the_default_cluster_carries_them_when_it_hosts(db, settings) -> None:
    settings.GPUFLEET_PROMETHEUS_OPERATOR = True
    from scheduling import actions as sched
    from scheduling.clusters import placement_actions as placing

    model = sched.create_gpu_model("l4", "NVIDIA L4", 23034, "NVIDIA-L4")
    sched.create_flavor("l4", gpu_model=model.name, mode="whole")
    placing.create_cluster("another", purpose="inference", region="us-east-1")
    assert rules_per_cluster() == {"another": 0, "default": 1}
