"""Issue 27 item 7: inputs that answered 500 (PostgreSQL refuses NUL in text; unbounded bodies; dates past the
calendar) are a 400/404/413 application/problem+json naming the field, on every route of the published document.
Each test here failed on d2fa82c."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.test import Client

from tests.support import factories
from tests.support.clock import pinned

from .conftest import api_routes, api_schema, concrete_path, snapshot

pytestmark = pytest.mark.django_db
NUL = "\x00"


def problem_fields(response: Any) -> list[str]:
    assert response["Content-Type"].startswith("application/problem+json"), (response.status_code,
                                                                              response["Content-Type"])
    body = response.json()
    assert body["status"] == response.status_code and body["errors"], body
    return [e["field"] for e in body["errors"]]


def list_routes(world: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """(path, declared query parameters) of every GET operation without a path parameter."""
    schema = api_schema(world["client"])
    return [(template, sorted({p["name"] for p in item["get"].get("parameters", []) if p["in"] == "query"}
                              | {"tenant"}))
            for template, item in sorted(schema["paths"].items()) if "get" in item and "{" not in template]


def test_nul_in_any_query_filter_is_400_naming_it(world) -> None:
    client, checked = world["client"], 0
    for path, parameters in list_routes(world):
        for name in parameters:
            for value in (NUL, f"acme{NUL}", f"2026-11-01T00:00:00Z{NUL}"):
                response = client.get(path, {name: value})
                assert response.status_code == 400, (path, name, response.status_code, response.content[:300])
                assert problem_fields(response) == [name], (path, name)
                checked += 1
    assert checked > 100  # every list route, every filter it declares


def test_nul_in_a_path_value_is_404_naming_it(world) -> None:
    client = world["client"]
    schema = api_schema(client)
    templates = [t for t, item in sorted(schema["paths"].items()) if "{" in t and "get" in item]
    assert len(templates) > 10
    for template in templates:
        path = concrete_path(world, template)
        parts = path.strip("/").split("/")
        index = next(i for i, part in enumerate(template.strip("/").split("/")) if part.startswith("{"))
        parts[index] = f"{parts[index]}{NUL}"
        response = client.get("/" + "/".join(parts) + "/")
        assert response.status_code == 404, (template, response.status_code, response.content[:300])
        problem_fields(response)


def test_a_body_over_the_limit_is_413_on_every_write_route(world, gitops_repo: Path) -> None:
    limit = django_settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    assert limit and limit <= 2 * 1024 * 1024
    body = json.dumps({"reason": "x" * limit})
    routes = api_routes(world)
    assert len(routes) >= 30  # 26 with a body, and the ones without (approve, finalize, DELETE...)
    before = snapshot(gitops_repo)
    for method, path, _template, _schema in routes:
        response = getattr(world["client"], method)(path, body, content_type="application/json")
        assert response.status_code == 413, (method, path, response.status_code, response.content[:300])
        assert problem_fields(response) == [""]
        assert str(limit) in response.json()["detail"]
    assert snapshot(gitops_repo) == before
    # The portal's forms too (a plain answer there), and a body just at the limit is still read.
    assert world["client"].post("/tenants/new/", "x" * (limit + 1),
                                content_type="application/x-www-form-urlencoded").status_code == 413
    fits = world["client"].post("/api/v1/tenants/", json.dumps({"slug": "fits", "trust_level": "standard",
                                                                "display_name": "fits"}).ljust(limit),
                                content_type="application/json")
    assert fits.status_code == 201, fits.content


FINDING = {"tenant": "acme", "namespace": "tenant-acme", "pod": "train-1", "container": "main", "device": "GPU-1",
           "mig_instance": "", "flavor": "h100", "start": "2026-11-01T00:00:00+00:00", "end": None, "ongoing": True,
           "idle_seconds": 5400, "gpu_equivalent_seconds": "5400", "memory_mib": "1024", "cost": None,
           "currency": "USD", "signal": "profiling"}


@pytest.mark.parametrize(("body", "field"), [
    ({"tenant": "acme", "finding": {**FINDING, "idle_seconds": "abc"}}, "finding.idle_seconds"),
    ({"tenant": "acme", "finding": {**FINDING, "idle_seconds": "5400"}}, "finding.idle_seconds"),
    ({"tenant": "acme", "finding": {**FINDING, "idle_seconds": -1}}, "finding.idle_seconds"),
    ({"tenant": f"acme{NUL}", "finding": FINDING}, "tenant"),
    ({"tenant": "acme", "finding": {**FINDING, "pod": f"train{NUL}"}}, "finding.pod"),
    ({"tenant": "acme", "finding": FINDING, "urgent": True}, "urgent"),
    ({"tenant": "acme", "finding": {**FINDING, "extra": 1}}, "finding.extra"),
    ({"tenant": 5, "finding": FINDING}, "tenant"),
])
def test_fleet_notices_refuse_bad_bodies_naming_the_field(world, gitops_repo: Path, body: Any, field: str) -> None:
    before = snapshot(gitops_repo)
    response = world["client"].post("/api/v1/fleet/notices/", body, format="json")
    assert response.status_code == 400, response.content
    assert problem_fields(response) == [field], response.json()
    assert snapshot(gitops_repo) == before
    ok = world["client"].post("/api/v1/fleet/notices/", {"tenant": "acme", "finding": FINDING}, format="json")
    assert ok.status_code == 201, ok.content


@pytest.mark.parametrize(("body", "field"), [
    ({"tier": f"scale{NUL}"}, "tier"),
    ({"tier": "standard", "idle_seconds": "abc"}, "idle_seconds"),
    ({"tier": 0}, "tier"),
    ({"tier": ["standard"]}, "tier"),
])
def test_scale_to_zero_refuses_bad_bodies_naming_the_field(world, gitops_repo: Path, body: Any, field: str) -> None:
    before = snapshot(gitops_repo)
    response = world["client"].post(f"/api/v1/fleet/endpoints/{world['endpoint'].pk}/scale-to-zero/", body,
                                    format="json")
    assert response.status_code == 400, response.content
    assert problem_fields(response) == [field], response.json()
    assert snapshot(gitops_repo) == before


@pytest.mark.parametrize("at", ["2026-13-01T00:00:00Z", "2026-02-30T00:00:00Z", "2026-11-01T25:00:00Z",
                                "9999-12-31T23:00:00-05:00", "0001-01-01T00:00:00Z", "2026-W49-1", "20261201",
                                " 2026-11-01T00:00:00Z", "\uff12\uff10\uff12\uff16-11-01T00:00:00Z"])
def test_node_health_at_out_of_the_calendar_is_400(world, at: str) -> None:
    with pinned():
        response = world["client"].get("/api/v1/node-health/", {"at": at})
    assert response.status_code == 400, (response.status_code, response.content[:300])
    assert problem_fields(response) == ["at"]


@pytest.mark.parametrize("start", ["9999-12-31T23:00:00Z", "9999-12-31", "2026-13-01T00:00:00Z", "0001-01-01T00:00Z"])
@pytest.mark.parametrize("page", ["/fleet/", "/fleet/numbers/idle.csv", "/fleet/numbers/utilisation.csv",
                                  "/fleet/tenants/acme/"])
def test_portal_fleet_windows_past_the_calendar_are_400(world, page: str, start: str) -> None:
    client = Client()
    client.force_login(world["admin"])
    with pinned():
        response = client.get(page, {"start": start})
        assert response.status_code == 400, (page, start, response.status_code)
        assert client.get(page, {"end": start}).status_code == 400


def test_nul_in_portal_filters_is_400(world) -> None:
    client = Client()
    client.force_login(factories.user("viewer-1"))
    for page in ("/tenants/", "/fleet/numbers/idle.csv", "/billing/"):
        response = client.get(page, {"tenant": NUL, "q": NUL})
        assert response.status_code == 400, (page, response.status_code)
