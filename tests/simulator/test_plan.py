"""`gpufleet plan autoscaling`: candidate settings of the three layers on an endpoint's traffic, a
markdown plan with the recommendation and the numbers behind it."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from scheduling import actions
from scheduling.simulator.planner import plan
from tests.support import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def endpoint():
    model = actions.create_gpu_model("h100-80gb", "NVIDIA H100 80GB HBM3", 81559, "NVIDIA-H100-80GB-HBM3")
    actions.create_flavor("h100", gpu_model=model.name, mode="whole", capacity=32)
    actions.create_node_pool("h100-pool", flavor="h100", gpu_limit=32)
    tenant = factories.tenant("chat", phase="ready")
    actions.set_quota(tenant, flavor="h100", nominal=8)
    return actions.create_endpoint(tenant, "llama", model="llama-70b", tier="critical")


def plan_cli(*args: str) -> str:
    out = StringIO()
    call_command("plan", "autoscaling", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_plan_from_a_traffic_file_recommends_the_backlog_signal(endpoint, tmp_path):
    # A quiet night and a steep morning ramp: HPA on duty cycle lags, queue depth sees the backlog.
    hours = [0.5] * 7 + [2, 6, 12, 14, 14, 12, 10, 8, 6, 4, 2] + [0.5] * 6
    traffic = tmp_path / "rps.csv"
    traffic.write_text("hour,rps\n" + "".join(f"{h},{r}\n" for h, r in enumerate(hours)))
    out_md = tmp_path / "plan.md"
    doc = json.loads(plan_cli("--endpoint", "chat/llama", "--traffic", str(traffic), "--days", "1",
                              "--rps-per-replica", "2", "--output", str(out_md), "--json"))
    assert doc["recommended"]["signal"] in {"queue-depth", "kv-cache"}
    duty = next(c for c in doc["candidates"] if c["option"] == "duty-cycle")
    best = next(c for c in doc["candidates"] if c["option"] == doc["recommended"]["signal"])
    assert best["ttft_p99_s"] < duty["ttft_p99_s"] and best["score"] > duty["score"]
    assert len(doc["candidates"]) == 3 + 2 + 2 + 2  # min replicas {0, 1} for a tier whose minimum is 1
    text = out_md.read_text()
    assert text.startswith("# Autoscaling plan: chat/llama") and "| signal | duty-cycle |" in text


def test_plan_without_a_file_uses_recorded_usage(endpoint):
    text = plan_cli("--endpoint", "chat/llama", "--days", "0.5")
    assert "recorded hourly GPU use of h100" in text and "## Recommended settings" in text


@pytest.mark.parametrize(("args", "message"), [
    (["--endpoint", "chat"], "SLUG/NAME"),
    (["--endpoint", "chat/nope"], "no endpoint"),
    (["--endpoint", "chat/llama", "--days", "0"], "--days"),
])
def test_bad_arguments(endpoint, args, message):
    with pytest.raises(CommandError, match=message):
        plan_cli(*args)


def test_planner_keeps_the_best_of_each_layer():
    base = {"days": 0.25, "fleet": {"node_pools": [{"name": "p", "flavor": "h100", "nodes": 1, "gpu_limit": 16}]},
            "tenants": [{"name": "t"}],
            "endpoints": [{"name": "e", "tenant": "t", "pool": "p", "capacity_rps": 1,
                           "traffic": {"base_rps": 3, "bursts_per_day": 8, "burst_multiplier": 3}}]}
    result = plan(base, seed=1)
    assert set(result["recommended"]) == {"signal", "min_replicas", "gang", "consolidation"}
    assert result["expected"]["score"] == max(c["score"] for c in result["candidates"] if c["layer"] == "consolidation")


@pytest.mark.django_db(transaction=True)
def test_portal_plan_button_runs_the_plan_through_the_worker(endpoint, client, admin_user, eager_tasks):
    client.force_login(admin_user)
    page = client.get(f"/gpu/tenants/{endpoint.tenant.slug}/").content.decode()
    assert 'data-testid="plan-llama"' in page
    response = client.post(f"/gpu/endpoints/{endpoint.pk}/plan/")
    assert response.status_code == 302
    body = client.get(response["Location"]).content.decode()
    assert 'data-testid="plan"' in body and "# Autoscaling plan: chat/llama" in body


def test_portal_plan_button_is_for_admins(endpoint, client):
    owner = factories.user("member")
    client.force_login(owner)
    assert client.post(f"/gpu/endpoints/{endpoint.pk}/plan/").status_code == 403
