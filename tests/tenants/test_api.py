"""/api/v1/tenants/: bad input is a 400 naming the field and changes nothing; scoping; lifecycle."""

from __future__ import annotations

import pytest

from gpufleet.audit.models import AuditEvent
from tenants.models import Phase, Tenant
from tests.support import factories

pytestmark = pytest.mark.django_db

URL = "/api/v1/tenants/"


@pytest.fixture
def alice(db):
    return factories.user("alice")


@pytest.fixture
def alice_api(api, alice):
    api.force_authenticate(alice)
    return api


def fields(response) -> dict[str, str]:
    return {e["field"]: e["reason"] for e in response.json()["errors"]}


BAD_SLUGS = [
    ("Acme", "lowercase"),
    ("ab", "3 to 40"),
    ("a" * 41, "3 to 40"),
    ("-acme", "start and end"),
    ("acme-", "start and end"),
    ("acmé", "ASCII"),
    ("ac_me", "DNS-1123"),
    ("tenant-acme", "must not start with"),
    ("kube-acme", "must not start with"),
    ("", "required"),
    # Python's `$` matches before a trailing newline: "abc\n" was a tenant, with a GitOps path `tenants/abc\n/`.
    ("abc\n", "whitespace or control"),
    ("abc\r\n", "whitespace or control"),
    (" abc", "whitespace or control"),
    ("ab c", "whitespace or control"),
    ("abc\t", "whitespace or control"),
    ("abc\x00", "NUL character"),               # the API parser refuses it (gpufleet/api/parsers.py)
    ("abc\u00a0", "whitespace or control"),      # non-breaking space
    ("abc\u0085", "whitespace or control"),      # NEL, a line break to str.splitlines
    ("\u0430cme", "ASCII"),                      # Cyrillic a, looks like "acme"
    ("acme\uff0d1", "ASCII"),                    # full-width hyphen-minus
    (123, "must be a string, not a number"),     # DRF's CharField would have made it "123"
    (12.5, "must be a string, not a number"),
    (True, "must be a string"),
    (["acme"], "must be a string"),
]


@pytest.mark.parametrize(("slug", "reason"), BAD_SLUGS)
def test_bad_slug_is_rejected_and_nothing_happens(alice_api, slug, reason, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        response = alice_api.post(URL, {"slug": slug, "trust_level": "standard"}, format="json")
    assert response.status_code == 400, response.content
    assert "slug" in fields(response)
    assert reason in fields(response)["slug"]
    assert not Tenant.objects.exists()
    assert not AuditEvent.objects.exists()
    assert callbacks == []


def test_duplicate_slug_even_after_delete(alice_api):
    assert alice_api.post(URL, {"slug": "acme", "trust_level": "standard"}, format="json").status_code == 201
    tenant = Tenant.objects.get(slug="acme")
    alice_api.delete(f"{URL}{tenant.pk}/")
    assert Tenant.objects.get(slug="acme").phase == Phase.DELETED
    response = alice_api.post(URL, {"slug": "acme", "trust_level": "standard"}, format="json")
    assert response.status_code == 400
    assert "already taken" in fields(response)["slug"]
    assert Tenant.objects.count() == 1


def test_unknown_trust_level_and_missing_fields(alice_api, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        bad_level = alice_api.post(URL, {"slug": "acme", "trust_level": "root"}, format="json")
        missing = alice_api.post(URL, {}, format="json")
    assert bad_level.status_code == 400
    assert "must be one of untrusted, standard, trusted" in fields(bad_level)["trust_level"]
    assert missing.status_code == 400
    assert set(fields(missing)) == {"slug", "trust_level"}
    assert not Tenant.objects.exists()
    assert callbacks == []


def test_request_makes_requester_owner_and_audits(alice_api, alice):
    response = alice_api.post(URL, {"slug": "acme", "trust_level": "trusted", "display_name": "Acme"}, format="json")
    assert response.status_code == 201
    body = response.json()
    assert body["phase"] == "requested"
    assert body["generation"] == 1 and body["observed_generation"] == 0
    assert body["memberships"] == [{"user": "alice", "role": "owner", "source": "local"}]
    event = AuditEvent.objects.get(action="tenant.request")
    assert event.actor_user == alice
    assert event.after["trust_level"] == "trusted"


def test_approve_is_admin_only_and_idempotent(alice_api, admin_api, django_capture_on_commit_callbacks):
    tenant_id = alice_api.post(URL, {"slug": "acme", "trust_level": "standard"}, format="json").json()["id"]
    assert alice_api.post(f"{URL}{tenant_id}/approve/").status_code == 403
    with django_capture_on_commit_callbacks() as first:
        assert admin_api.post(f"{URL}{tenant_id}/approve/").json()["phase"] == "approved"
    with django_capture_on_commit_callbacks() as second:
        response = admin_api.post(f"{URL}{tenant_id}/approve/")
    assert response.status_code == 200 and response.json()["phase"] == "approved"
    assert len(first) == 1 and second == []
    assert AuditEvent.objects.filter(action="tenant.approve").count() == 1


def test_update_bumps_generation_only_on_change(alice_api, admin_api):
    tenant_id = alice_api.post(URL, {"slug": "acme", "trust_level": "standard"}, format="json").json()["id"]
    same = alice_api.patch(f"{URL}{tenant_id}/", {"display_name": "acme"}, format="json")
    assert same.json()["generation"] == 1
    changed = alice_api.patch(f"{URL}{tenant_id}/", {"display_name": "Acme GPUs"}, format="json")
    assert changed.json()["generation"] == 2
    assert alice_api.patch(f"{URL}{tenant_id}/", {"trust_level": "trusted"}, format="json").status_code == 403
    assert admin_api.patch(f"{URL}{tenant_id}/", {"trust_level": "trusted"}, format="json").json()["generation"] == 3
    immutable = alice_api.patch(f"{URL}{tenant_id}/", {"slug": "other"}, format="json")
    assert immutable.status_code == 400 and fields(immutable) == {"slug": "is immutable"}
    empty = alice_api.patch(f"{URL}{tenant_id}/", {"display_name": ""}, format="json")
    assert empty.status_code == 400 and fields(empty) == {"display_name": "is required"}
    assert Tenant.objects.get(pk=tenant_id).slug == "acme"


def test_member_of_a_gets_404_for_b_everywhere(api, db):
    alice, bob = factories.user("alice"), factories.user("bob")
    factories.tenant("team-a", owner=alice)
    b = factories.tenant("team-b", owner=bob)
    api.force_authenticate(alice)
    listing = api.get(URL).json()
    assert [t["slug"] for t in listing["results"]] == ["team-a"]
    detail = f"{URL}{b.pk}/"
    assert api.get(detail).status_code == 404
    assert api.patch(detail, {"display_name": "mine now"}, format="json").status_code == 404
    assert api.delete(detail).status_code == 404
    for verb in ("approve", "reject", "suspend", "resume"):
        assert api.post(f"{detail}{verb}/").status_code == 404, verb
    b.refresh_from_db()
    assert b.display_name == "team-b team" and b.phase == Phase.REQUESTED


def test_viewer_cannot_change_tenant(api, db):
    viewer = factories.user("viewer")
    tenant = factories.tenant("team-a", members={"viewer": viewer})
    api.force_authenticate(viewer)
    assert api.get(f"{URL}{tenant.pk}/").status_code == 200
    assert api.patch(f"{URL}{tenant.pk}/", {"display_name": "x"}, format="json").status_code == 403
    assert api.delete(f"{URL}{tenant.pk}/").status_code == 403


def test_anonymous_gets_401(api, db):
    tenant = factories.tenant("team-a")
    for method, url in [("get", URL), ("post", URL), ("get", f"{URL}{tenant.pk}/"),
                        ("patch", f"{URL}{tenant.pk}/"), ("delete", f"{URL}{tenant.pk}/")]:
        assert getattr(api, method)(url).status_code == 401, (method, url)


def test_list_query_count_is_constant(api, db, django_assert_max_num_queries):
    admin = factories.user("boss", roles={"platform-admin"})
    for index in range(15):
        factories.tenant(f"team-{index:02d}", owner=factories.user(f"user{index}"))
    api.force_authenticate(admin)
    with django_assert_max_num_queries(6):
        response = api.get(URL)
    assert len(response.json()["results"]) == 15 and response.json()["next"] is None


def test_openapi_schema_is_served(admin_api):
    response = admin_api.get("/api/v1/schema/")
    assert response.status_code == 200
    assert b"/api/v1/tenants/" in response.content
