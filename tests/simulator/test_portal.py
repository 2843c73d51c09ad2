"""The portal's Simulate page: admins run presets or uploaded scenarios through the worker; tenant users
are refused."""

from __future__ import annotations

import pytest
import yaml
from django.core.files.uploadedfile import SimpleUploadedFile

from scheduling.models import SimulationRun
from scheduling.simulation.chart import bar_chart, charts
from tests.support import factories

pytestmark = pytest.mark.django_db(transaction=True)

SCENARIO = {"days": 0.2,
            "fleet": {"node_pools": [{"name": "h100", "flavor": "h100", "nodes": 1, "provisioner": "none"}]},
            "tenants": [{"name": "a", "quotas": [{"flavor": "h100", "nominal": 8}]}],
            "workloads": [{"tenant": "a", "flavor": "h100", "jobs_per_hour": 4, "pods": 2, "duration_s": 1200}]}


def test_tenant_user_is_refused(client):
    owner = factories.user("lead")
    factories.tenant("vision", owner=owner, phase="ready")
    client.force_login(owner)
    assert client.get("/gpu/simulate/").status_code == 403
    assert client.post("/gpu/simulate/", {"preset": "fair-share", "seed": 0}).status_code == 403
    assert SimulationRun.objects.count() == 0


def test_admin_runs_a_preset_and_sees_charts(client, admin_user, eager_tasks):
    client.force_login(admin_user)
    page = client.get("/gpu/simulate/")
    assert page.status_code == 200 and 'data-testid="simulate-form"' in page.content.decode()
    response = client.post("/gpu/simulate/", {"preset": "seven-of-eight", "seed": 2, "days": 0.25})
    assert response.status_code == 302
    run = SimulationRun.objects.get()
    assert run.state == "done" and set(run.result["variants"]) == {"pod-by-pod", "gang"}
    body = client.get(response["Location"]).content.decode()
    assert 'data-testid="variant-pod-by-pod"' in body and 'data-testid="variant-gang"' in body
    assert body.count("<svg") >= 3 and "Partial-gang GPU-minutes" in body


def test_admin_uploads_a_scenario(client, admin_user, eager_tasks):
    client.force_login(admin_user)
    upload = SimpleUploadedFile("s.yaml", yaml.safe_dump(SCENARIO).encode())
    response = client.post("/gpu/simulate/", {"scenario": upload, "seed": 1})
    assert response.status_code == 302
    run = SimulationRun.objects.get()
    assert run.state == "done" and run.result["tenants"][0]["jobs"] > 0


@pytest.mark.parametrize(("data", "needle"), [
    ({"seed": 0}, "pick a preset or upload a scenario"),
    ({"seed": 0, "preset": "seven-of-eight", "scenario": "x"}, "pick a preset or upload a scenario"),
    ({"seed": 0, "scenario": "tenants: []"}, "(root): &#x27;fleet&#x27; is a required property"),
    ({"seed": -1, "preset": "fair-share"}, "greater than or equal to 0"),
])
def test_bad_input_is_400_naming_the_field_and_nothing_is_written(client, admin_user, data, needle):
    client.force_login(admin_user)
    if isinstance(data.get("scenario"), str):
        data = dict(data, scenario=SimpleUploadedFile("s.yaml", data["scenario"].encode()))
    response = client.post("/gpu/simulate/", data)
    assert response.status_code == 400
    assert needle in response.content.decode()
    assert SimulationRun.objects.count() == 0


def test_chart_escapes_labels_and_scales_bars():
    svg = bar_chart("t<1>", [("<b>", 10.0), ("b", 5.0)])
    assert "<b>" not in svg.replace('<text x="0" y="14" font-size="13" font-weight="600">', "") and "&lt;b&gt;" in svg
    assert 'width="310.0"' in svg and 'width="155.0"' in svg  # (560 - 170 - 80) x value / max
    assert charts({"seed": 0, "tenants": [], "endpoints": [], "fleet": {
        "idle_gpu_minutes": 0, "partial_gang_gpu_minutes": 0, "evictions": 0, "node_hours": 0}, "score": 0}) == []


def test_every_preset_explains_itself_on_the_form_page(client, admin_user):
    """Issue 28: the preset list was bare names; each now says what it reproduces and what it compares."""
    from scheduling.simulator import PRESETS

    client.force_login(admin_user)
    html = client.get("/gpu/simulate/").content.decode()
    guide = html[html.index('data-testid="presets"'):]
    for name, build in PRESETS.items():
        _base, variants = build()
        entry = guide[guide.index(f"<dt><strong>{name}</strong></dt>"):]
        entry = entry[:entry.index("</dd>")]
        assert len(entry) > 80 and all(variant in entry for variant in variants), entry
