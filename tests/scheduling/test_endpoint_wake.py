"""Every inference endpoint that scales to zero can be woken (issue 26: the batch tier never could).

KEDA scales a ScaledObject from 0 to 1 only when one of its triggers is *active* (keda@v2.20.2
pkg/scaling/executor/scale_scaledobjects.go). Activity per scaler, transcribed from its source:
* prometheus (pkg/scalers/prometheus_scaler.go:266-319): an empty result with ignoreNullValues is 0; active
  iff value > activationThreshold. At zero replicas vLLM runs nowhere, so its series are absent: 0 > 0 is
  false, whatever the threshold.
* cron (pkg/scalers/cron_scaler.go:123-151): active iff now is inside [start, end) of its schedules.
So a ScaledObject with minReplicaCount 0 wakes only through a cron trigger."""

from __future__ import annotations

import pytest
from django.apps import apps

from scheduling import actions
from scheduling.actions import ActionError
from scheduling.models import SlaTier
from tenants.reconcile import desired_manifests

pytestmark = pytest.mark.django_db


def active_at_zero_replicas(trigger: dict) -> bool:
    """Can this trigger ever be active while the target runs no replica?"""
    meta = trigger["metadata"]
    if trigger["type"] == "prometheus":
        absent = 0.0 if meta.get("ignoreNullValues", "true") == "true" else None  # None: a scaler error
        return absent is not None and absent > float(meta.get("activationThreshold", "0"))
    if trigger["type"] == "cron":
        return bool(meta.get("start")) and bool(meta.get("end"))
    raise AssertionError(f"no model for trigger type {trigger['type']}")


def test_every_seeded_tier_that_scales_to_zero_can_wake(fleet, tenants) -> None:
    for tier in SlaTier.objects.all():
        actions.create_endpoint(tenants["trusted"], f"llm-{tier.name}", model="m", tier=tier.name)
    scaled = {m["metadata"]["name"]: m["spec"] for m in desired_manifests(tenants["trusted"])
              if m["kind"] == "ScaledObject"}
    assert set(scaled) == {"endpoint-llm-critical", "endpoint-llm-standard", "endpoint-llm-batch"}
    for name, spec in scaled.items():
        if spec["minReplicaCount"] == 0:
            assert any(active_at_zero_replicas(t) for t in spec["triggers"]), f"{name} never leaves zero"


def test_a_tier_that_could_never_wake_is_refused() -> None:
    before = SlaTier.objects.count()
    with pytest.raises(ActionError) as refused:
        actions.set_sla_tier("nightly", min_replicas=0, max_replicas=2)
    assert "vLLM exports no queue depth" in refused.value.errors["prewarm_start"][0]
    assert SlaTier.objects.count() == before
    tier = actions.set_sla_tier("nightly", min_replicas=0, max_replicas=2, prewarm_start="0 1 * * *",
                                prewarm_end="0 5 * * *")
    assert tier.prewarm_start == "0 1 * * *"
    assert actions.set_sla_tier("warm", min_replicas=1).min_replicas == 1  # never at zero: no window needed


def test_migration_gives_the_old_batch_tier_its_window() -> None:
    migration = __import__("scheduling.migrations.0010_batch_tier_wake_window", fromlist=["forwards"])
    SlaTier.objects.filter(name="batch").update(prewarm_start="", prewarm_end="")
    SlaTier.objects.create(name="custom", min_replicas=0)  # an admin's tier: not touched by the migration
    migration.forwards(apps, None)
    assert SlaTier.objects.filter(name="batch", prewarm_start="0 0 * * *", prewarm_end="0 6 * * *").exists()
    assert SlaTier.objects.get(name="custom").prewarm_start == ""
