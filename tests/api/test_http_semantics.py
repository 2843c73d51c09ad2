"""The API's contract for automation clients: problem details, unknown fields, schema types, idempotent
POSTs, ETag/If-Match, cursor pagination, the root listing every collection, and memberships."""

from __future__ import annotations

import json

import pytest
import yaml

from gpufleet.api.models import IdempotencyKey
from scheduling import actions as sched
from tenants.models import Membership, Tenant
from tests.support import factories

URL = "/api/v1/tenants/"
pytestmark = pytest.mark.django_db


@pytest.fixture
def catalog(db):
    model = sched.create_gpu_model("a100-80gb", "NVIDIA A100-SXM4-80GB", 81920)
    return sched.create_flavor("a100", gpu_model=model.name, mode="whole", capacity=8)


def test_errors_are_problem_details_with_the_old_keys_kept(admin_api):
    response = admin_api.post(URL, {"slug": "Bad", "trust_level": "root"}, format="json")
    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    body = response.json()
    assert body["type"] == "urn:gpufleet:problem:invalid" and body["title"] == "Bad Request" and body["status"] == 400
    assert body["fields"]["trust_level"] == ["must be one of untrusted, standard, trusted (got 'root')"]
    assert "slug" in body["fields"] and body["error"] == "invalid"
    assert {"field": "slug", "reason": "must be lowercase"} in body["errors"]
    assert "slug: must be lowercase" in body["detail"]
    missing = admin_api.get(f"{URL}999999/")
    assert missing.status_code == 404 and missing.json()["status"] == 404
    assert missing["Content-Type"] == "application/problem+json"


def test_unknown_fields_are_rejected_on_every_write(admin_api, catalog):
    factories.tenant("vision", owner=factories.user("lead"))
    cases = [
        (URL, {"slug": "acme", "trust_level": "standard", "colour": "red"}),
        ("/api/v1/quotas/", {"tenant": "vision", "flavor": "a100", "nominal": 1, "nominal_quota": 2}),
        ("/api/v1/endpoints/", {"tenant": "vision", "name": "chat", "model": "m", "tier": "standard", "gpus": 1}),
        ("/api/v1/tokens/", {"name": "ci", "scope": "all"}),
        ("/api/v1/members/", {"tenant": "vision", "user": "lead", "role": "admin", "expires": "never"}),
    ]
    for url, body in cases:
        response = admin_api.post(url, body, format="json")
        unknown = (set(body) - {"slug", "trust_level", "tenant", "flavor", "nominal", "name", "model", "tier",
                                "user", "role"}).pop()
        assert response.status_code == 400, (url, response.content)
        assert response.json()["fields"] == {unknown: ["is not a field of this request"]}, url
    assert not Tenant.objects.filter(slug="acme").exists()


def test_schema_types_enums_and_limits_match_what_is_enforced(admin_api):
    doc = yaml.safe_load(admin_api.get("/api/v1/schema/").content)
    schemas = doc["components"]["schemas"]
    assert schemas["QuotaWrite"]["properties"]["nominal"] == {"type": "integer", "minimum": 0, "maximum": 1000000}
    assert schemas["TenantCreate"]["properties"]["trust_level"] == {"$ref": "#/components/schemas/TrustLevelEnum"}
    assert schemas["TrustLevelEnum"]["enum"] == ["untrusted", "standard", "trusted"]
    slug = schemas["TenantCreate"]["properties"]["slug"]
    assert (slug["type"], slug["minLength"], slug["maxLength"]) == ("string", 3, 40)  # no "" alternative
    assert schemas["TenantCreate"]["properties"]["display_name"]["maxLength"] == 200
    assert schemas["EndpointCreate"]["properties"]["kv_cache_target"]["maximum"] == 1
    assert "/api/v1/members/{id}/" in doc["paths"]
    errors = doc["paths"]["/api/v1/quotas/"]["post"]["responses"]["4XX"]["content"]
    assert errors == {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}


def test_api_root_lists_every_collection(admin_api):
    root = admin_api.get("/api/v1/", HTTP_ACCEPT="application/json").json()
    for name in ("tenants", "members", "quotas", "endpoints", "tokens", "flavors", "billing/invoices",
                 "billing/usage", "billing/prices", "billing/exports", "billing/reconciliation", "sync"):
        assert name in root, name
    assert root["sync"].endswith("/api/v1/sync/")


def test_a_retried_post_with_the_same_key_returns_the_first_result(admin_api):
    body = {"slug": "vision", "trust_level": "standard"}
    first = admin_api.post(URL, body, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    again = admin_api.post(URL, body, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json() and again["Idempotent-Replayed"] == "true"
    assert Tenant.objects.filter(slug="vision").count() == 1
    other = admin_api.post(URL, {**body, "slug": "vision-b"}, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    assert other.status_code == 422 and other.json()["error"] == "idempotency_key_reused"
    assert not Tenant.objects.filter(slug="vision-b").exists()
    # Without a key, a repeat is a new request (and the slug is taken).
    assert admin_api.post(URL, body, format="json").status_code == 400


def test_idempotency_keys_are_per_user(api, db):
    alice, bob = factories.user("alice"), factories.user("bob")
    api.force_authenticate(alice)
    assert api.post(URL, {"slug": "alpha", "trust_level": "standard"}, format="json",
                    HTTP_IDEMPOTENCY_KEY="same").status_code == 201
    api.force_authenticate(bob)
    answer = api.post(URL, {"slug": "bravo", "trust_level": "standard"}, format="json", HTTP_IDEMPOTENCY_KEY="same")
    assert answer.status_code == 201 and answer.json()["slug"] == "bravo"
    assert IdempotencyKey.objects.filter(key="same").count() == 2


def test_stale_if_match_is_412_and_changes_nothing(admin_api):
    tenant_id = admin_api.post(URL, {"slug": "vision", "trust_level": "standard"}, format="json").json()["id"]
    read = admin_api.get(f"{URL}{tenant_id}/")
    etag = read["ETag"]
    assert etag.startswith('"') and admin_api.get(f"{URL}{tenant_id}/")["ETag"] == etag
    changed = admin_api.patch(f"{URL}{tenant_id}/", {"display_name": "Vision"}, format="json", HTTP_IF_MATCH=etag)
    assert changed.status_code == 200 and changed["ETag"] != etag
    stale = admin_api.patch(f"{URL}{tenant_id}/", {"display_name": "Stale"}, format="json", HTTP_IF_MATCH=etag)
    assert stale.status_code == 412 and stale.json()["status"] == 412
    assert admin_api.delete(f"{URL}{tenant_id}/", HTTP_IF_MATCH=etag).status_code == 412
    tenant = Tenant.objects.get(pk=tenant_id)
    assert tenant.display_name == "Vision" and tenant.phase == "requested"
    assert admin_api.delete(f"{URL}{tenant_id}/", HTTP_IF_MATCH=changed["ETag"]).status_code == 202


def test_cursor_pagination_walks_every_row_once_in_creation_order(admin_api):
    slugs = [f"team-{i:02d}" for i in range(7)]
    for slug in slugs:
        factories.tenant(slug)
    seen, url = [], f"{URL}?limit=3"
    while url:
        page = admin_api.get(url).json()
        assert set(page) == {"next", "previous", "results"}
        seen += [t["slug"] for t in page["results"]]
        url = page["next"]
    assert seen == slugs
    assert [t["slug"] for t in admin_api.get(f"{URL}?slug=team-03").json()["results"]] == ["team-03"]


@pytest.mark.parametrize("limit", ["0", "-1", "501", "abc", "\uff15", "5.0", " 5", "1e2", ""])
def test_a_limit_outside_what_the_schema_says_is_a_400_naming_it(admin_api, limit):
    """Issue 27, strict types: DRF served the default page for 0/-1/abc and read a full-width five (U+FF15) as 5."""
    factories.tenant("vision")
    response = admin_api.get(URL, {"limit": limit})
    assert response.status_code == 400, response.content
    assert [e["field"] for e in response.json()["errors"]] == ["limit"], response.json()


def test_the_schema_documents_the_limit_range(admin_api):
    schema = yaml.safe_load(admin_api.get("/api/v1/schema/").content)
    limits = [p["schema"] for path in schema["paths"].values() for op in path.values() if isinstance(op, dict)
              for p in op.get("parameters", []) if p.get("name") == "limit"]
    assert limits and all(s == {"type": "integer", "minimum": 1, "maximum": 500} for s in limits)
    assert admin_api.get(URL, {"limit": "500"}).status_code == 200


def test_members_are_managed_by_tenant_admins(api, db):
    owner, bob, carol = factories.user("lead"), factories.user("bob"), factories.user("carol")
    factories.tenant("vision", owner=owner)
    factories.tenant("speech", owner=owner, members={"owner": owner, "viewer": bob})  # lead may see bob
    api.force_authenticate(owner)
    created = api.post("/api/v1/members/", {"tenant": "vision", "user": "bob", "role": "member"}, format="json")
    assert created.status_code == 201 and created.json()["role"] == "member"
    again = api.post("/api/v1/members/", {"tenant": "vision", "user": "bob", "role": "admin"}, format="json")
    assert again.status_code == 400 and "already a member" in again.json()["fields"]["user"][0]
    member_id = created.json()["id"]
    assert api.patch(f"/api/v1/members/{member_id}/", {"role": "admin"}, format="json").json()["role"] == "admin"
    assert api.patch(f"/api/v1/members/{member_id}/", {"user": "carol"}, format="json").json()["fields"] == \
        {"user": ["is immutable"], "role": ["This field is required."]}
    unknown = api.post("/api/v1/members/", {"tenant": "vision", "user": "nobody", "role": "member"}, format="json")
    assert unknown.status_code == 400 and "no user 'nobody'" in unknown.json()["fields"]["user"][0]
    # carol exists but shares no tenant with lead: the same answer as for nobody (no username enumeration).
    hidden = api.post("/api/v1/members/", {"tenant": "vision", "user": "carol", "role": "member"}, format="json")
    assert hidden.status_code == 400
    assert hidden.json() == json.loads(json.dumps(unknown.json()).replace("nobody", "carol"))
    listed = api.get("/api/v1/members/?tenant=vision&user=bob").json()["results"]
    assert [m["user"] for m in listed] == ["bob"]
    own = api.get("/api/v1/members/?user=lead").json()["results"][0]
    last_owner = api.delete(f"/api/v1/members/{own['id']}/")
    assert last_owner.status_code == 409 and "last owner" in last_owner.json()["detail"]
    assert api.delete(f"/api/v1/members/{member_id}/").status_code == 204
    assert not Membership.objects.filter(user=bob, tenant__slug="vision").exists()
    api.force_authenticate(carol)  # not a member: the membership is invisible
    assert api.get(f"/api/v1/members/{own['id']}/").status_code == 404


def test_quota_delete_is_for_platform_admins(api, admin_api, catalog):
    owner = factories.user("lead")
    tenant = factories.tenant("vision", owner=owner)
    quota = sched.set_quota(tenant, flavor="a100", nominal=2)
    listed = admin_api.get("/api/v1/quotas/?tenant=vision&flavor=a100").json()["results"]
    assert [q["id"] for q in listed] == [quota.pk]
    api.force_authenticate(owner)
    assert api.delete(f"/api/v1/quotas/{quota.pk}/").status_code == 403
    generation = Tenant.objects.get(pk=tenant.pk).generation
    assert admin_api.delete(f"/api/v1/quotas/{quota.pk}/").status_code == 204
    assert admin_api.get(f"/api/v1/quotas/{quota.pk}/").status_code == 404
    assert Tenant.objects.get(pk=tenant.pk).generation == generation + 1


def test_an_unknown_api_path_is_a_problem_too(admin_api, client):
    response = admin_api.get("/api/v1/no-such-collection/")
    assert response.status_code == 404 and response["Content-Type"] == "application/problem+json"
    assert response.json()["status"] == 404
    page = client.get("/no-such-page/")
    assert page.status_code == 404 and "problem" not in page["Content-Type"]
