"""A quota request shows its simulated effect on the cohort: computed by the worker task from recorded
usage, cached per request, shown on the review page and in the API preview."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest

from billing.models import UsageRecord
from gpufleet import clock
from scheduling import actions, tasks
from scheduling.models import QuotaSimulation
from tests.support import factories
from tests.support.clock import pinned

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def cohort_with_usage(gitops_repo):
    with pinned():
        model = actions.create_gpu_model("h100-80gb", "NVIDIA H100 80GB HBM3", 81559, "NVIDIA-H100-80GB-HBM3")
        flavor = actions.create_flavor("h100", gpu_model=model.name, mode="whole", capacity=16)
        cohort = actions.create_cohort("lab")
        vision, speech = (factories.tenant(slug, phase="ready") for slug in ("vision", "speech"))
        for t in (vision, speech):
            actions.set_tenant_scheduling(t, cohort=cohort.name)
            actions.set_quota(t, flavor="h100", nominal=8)
        start = clock.now().replace(minute=0, second=0, microsecond=0) - timedelta(hours=12)
        for h in range(8):  # vision used 12 GPUs for 8 h; speech 6 GPUs for the last 4 of them
            at = start + timedelta(hours=h)
            rows = [(vision, 12)] + ([(speech, 6)] if h >= 4 else [])
            for tenant, units in rows:
                UsageRecord.objects.create(tenant=tenant, flavor=flavor, hour=at, unit_seconds=Decimal(units * 3600),
                                           gpu_equivalent_seconds=Decimal(units * 3600), collected_at=at,
                                           window_start=at, window_end=at + timedelta(hours=1))
        yield vision, speech


def test_request_is_simulated_once_and_shows_waits_before_and_after(cohort_with_usage, eager_tasks, admin_user,
                                                                     client):
    _vision, speech = cohort_with_usage
    with pinned():
        # speech asks to lend nothing: vision can no longer borrow, so its reconstructed 12-GPU demand waits.
        request = actions.propose_quota_change(speech, flavor="h100", nominal=8, lending_limit=0)
    sim = QuotaSimulation.objects.get(request=request)
    assert sim.state == "done", sim.error
    rows = {t["name"]: t for t in sim.result["tenants"]}
    assert set(rows) == {"speech", "vision"}
    # 4 borrowed for 4 h, until speech reclaims them
    assert rows["vision"]["borrowed_gpu_hours"]["before"] == pytest.approx(16.0)
    assert rows["vision"]["borrowed_gpu_hours"]["after"] == 0.0
    assert rows["vision"]["wait_max_s"]["after"] > rows["vision"]["wait_max_s"]["before"]
    assert rows["speech"]["lent_gpu_hours"]["after"] == 0.0
    # Cached: the task does not run again, whatever it is asked.
    assert tasks.simulate_quota_request(request.pk) == "nothing to do"

    client.force_login(admin_user)
    page = client.get(f"/gpu/requests/{request.pk}/")
    assert page.status_code == 200
    body = page.content.decode()
    assert 'data-testid="simulation"' in body and 'data-testid="sim-vision"' in body

    from rest_framework.test import APIClient

    api = APIClient()
    api.force_authenticate(admin_user)
    preview = api.get(f"/api/v1/quota-requests/{request.pk}/preview/").json()
    assert preview["simulation"]["state"] == "done"
    assert preview["simulation"]["result"]["tenants"][1]["name"] == "vision"


def test_pending_simulation_is_picked_up_by_the_sweep(cohort_with_usage):
    _vision, speech = cohort_with_usage
    with pinned() as now:
        request = actions.propose_quota_change(speech, flavor="h100", nominal=4)  # no worker: stays pending
        assert QuotaSimulation.objects.get(request=request).state == "pending"
        assert tasks.sweep_quota_simulations() == 0  # not stale yet
    with pinned(now + timedelta(minutes=6)):
        assert tasks.sweep_quota_simulations() == 1
    assert QuotaSimulation.objects.get(request=request).state == "done"
