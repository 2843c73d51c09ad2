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


def test_capacity_rules_are_rendered_once_for_the_fleet(three_clusters) -> None:
    assert rules_per_cluster() == {"dev": 1, "inference": 0, "training": 0}


def test_the_default_cluster_carries_them_when_it_hosts(db) -> None:
    from scheduling import actions as sched
    from scheduling import placement_actions as placing

    model = sched.create_gpu_model("l4", "NVIDIA L4", 23034, "NVIDIA-L4")
    sched.create_flavor("l4", gpu_model=model.name, mode="whole")
    placing.create_cluster("another", purpose="inference", region="us-east-1")
    assert rules_per_cluster() == {"another": 0, "default": 1}
