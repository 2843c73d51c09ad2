"""API: the allocation policy and a tenant's isolation are admin-edited; bad input is a 400 naming the field."""

from __future__ import annotations

import pytest

from tenants.isolation.models import AllocationPolicy
from tests.support import factories

pytestmark = pytest.mark.django_db


def error_fields(response) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {e["field"]: e["reason"] for e in response.json()["errors"]}


def test_policy_read_by_anyone_signed_in_written_by_admins(api, admin_api) -> None:
    api.force_authenticate(factories.user("alice"))
    listed = api.get("/api/v1/gpu-allocation-policies/").json()
    rows = listed["results"] if isinstance(listed, dict) else listed
    assert {r["trust_level"]: r["allowed_modes"] for r in rows}["standard"] == ["whole", "mig"]
    assert api.patch("/api/v1/gpu-allocation-policies/standard/", {"allowed_modes": ["whole"]},
                     format="json").status_code == 403
    response = admin_api.patch("/api/v1/gpu-allocation-policies/standard/", {"allowed_modes": ["mig", "whole"]},
                               format="json")
    assert response.status_code == 200 and response.json()["allowed_modes"] == ["whole", "mig"]
    bad = admin_api.patch("/api/v1/gpu-allocation-policies/standard/", {"allowed_modes": ["vgpu"]}, format="json")
    assert bad.status_code == 400 and "allowed_modes" in error_fields(bad)


def test_tenant_isolation_tighten_only(api, admin_api) -> None:
    alice, bob = factories.user("alice"), factories.user("bob")
    acme = factories.tenant("acme", "standard", owner=alice)
    beta = factories.tenant("beta", "standard", owner=bob)
    url = f"/api/v1/tenants/{acme.pk}/isolation/"
    widen = admin_api.patch(url, {"allowed_modes": ["whole", "mig", "hami"]}, format="json")
    assert widen.status_code == 400
    assert "can only tighten" in error_fields(widen)["allowed_modes"]
    bad_cidr = admin_api.patch(url, {"egress_cidrs": ["10.1.2.3/8"]}, format="json")
    assert bad_cidr.status_code == 400 and "egress_cidrs" in error_fields(bad_cidr)
    ok = admin_api.patch(url, {"allowed_modes": ["mig"], "egress_fqdns": ["*.example.org"]}, format="json")
    assert ok.status_code == 200
    assert ok.json()["allowed_modes"] == ["mig"] and ok.json()["level_modes"] == ["whole", "mig"]
    api.force_authenticate(alice)
    assert api.get(url).json()["egress_fqdns"] == ["*.example.org"]
    # Owners see their isolation but cannot change it (egress exceptions are an admin decision).
    assert api.patch(url, {"egress_cidrs": ["10.0.0.0/8"]}, format="json").status_code == 403
    assert api.get(f"/api/v1/tenants/{beta.pk}/isolation/").status_code == 404
    assert api.patch(f"/api/v1/tenants/{beta.pk}/isolation/", {}, format="json").status_code == 404
    assert AllocationPolicy.objects.count() == 3
