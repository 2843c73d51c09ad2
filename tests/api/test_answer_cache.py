"""gpufleet.api.answercache + dataversion: cached answers are the uncached bytes, per caller, never stale.

These tests commit (transaction=True): the cache is bypassed inside a transaction, and the data version
moves only when a write commits -- which is exactly what is tested.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from rest_framework.test import APIClient

from billing.models import Invoice, InvoiceLine, UsageRecord
from gpufleet.accounts.models import ApiToken
from gpufleet.api import answercache, dataversion
from scheduling import actions as sched
from scheduling.models import Quota
from tenants import actions as tenant_actions
from tenants.models import Membership, Phase, Tenant
from tests.support import factories

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[answercache.AnswerCache]:
    cache = answercache.answer_cache()
    assert cache is not None, "the answer cache is on by default"
    cache.clear()
    yield cache
    cache.clear()


def client_for(user: Any) -> APIClient:
    plaintext, prefix, digest = ApiToken.generate()
    ApiToken.objects.create(user=user, name="t", prefix=prefix, digest=digest)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    return client


class Fleet:
    """Two tenants with an owner each, a platform admin; a quota, an invoice with lines and usage on A."""

    def __init__(self) -> None:
        self.admin = factories.user("cache-admin", roles={"platform-admin"})
        self.alice = factories.user("alice")
        self.bob = factories.user("bob")
        self.a = factories.tenant("team-a", "trusted", owner=self.alice, phase=Phase.READY)
        self.b = factories.tenant("team-b", "trusted", owner=self.bob, phase=Phase.READY)
        sched.create_gpu_model("h100-80gb", "NVIDIA H100 80GB HBM3", 81559, "NVIDIA-H100-80GB-HBM3")
        self.flavor = sched.create_flavor("h100", gpu_model="h100-80gb", mode="whole", capacity=64)
        self.month = clock_month()
        for tenant in (self.a, self.b):
            Quota.objects.create(tenant=tenant, flavor=self.flavor, nominal=2)
            invoice = Invoice.objects.create(tenant=tenant, period=self.month.date(), currency="EUR")
            InvoiceLine.objects.create(
                invoice=invoice, position=1, kind="usage", flavor=self.flavor, flavor_name="h100",
                description="GPU time", charge_start=self.month, charge_end=self.month + timedelta(days=1),
                quantity=Decimal(1), unit_price=Decimal(2), amount=Decimal(2), unit_seconds=Decimal(3600),
                gpu_equivalent_seconds=Decimal(3600))
            UsageRecord.objects.create(
                tenant=tenant, flavor=self.flavor, hour=self.month, unit_seconds=Decimal(3600),
                gpu_equivalent_seconds=Decimal(3600), collected_at=self.month + timedelta(days=2),
                window_start=self.month, window_end=self.month + timedelta(days=1))

    def routes(self, tenant: Tenant) -> dict[str, str]:
        return {
            "tenant list": "/api/v1/tenants/",
            "tenant list, limit": "/api/v1/tenants/?limit=1",
            "tenant detail": f"/api/v1/tenants/{tenant.pk}/",
            "quota list": "/api/v1/quotas/",
            "quota detail": f"/api/v1/quotas/{Quota.objects.get(tenant=tenant).pk}/",
            "invoice list": "/api/v1/billing/invoices/",
            "invoice detail": f"/api/v1/billing/invoices/{Invoice.objects.get(tenant=tenant).pk}/",
            "usage": f"/api/v1/billing/usage/?tenant={tenant.slug}&period={self.month:%Y-%m}",
        }


def clock_month() -> datetime:
    # A fixed month: nothing here depends on today's date.
    return datetime(2026, 3, 1, tzinfo=UTC)


@pytest.fixture
def fleet() -> Fleet:
    return Fleet()


def answer(client: APIClient, path: str) -> tuple[int, bytes, dict[str, str]]:
    response = client.get(path)
    headers = dict(response.items())
    assert headers.pop("X-Request-Id")  # one per request, by the audit middleware
    return response.status_code, response.content, headers


def version() -> int:
    found = dataversion.read_version()
    assert found is not None
    return found


# --- the version ---------------------------------------------------------------------------------------


def test_every_table_but_the_unwatched_ones_has_the_trigger() -> None:
    tables = set(connection.introspection.django_table_names(only_existing=True, include_views=False))
    watched = dataversion.tables_with_trigger(connection)
    assert tables - dataversion.UNWATCHED <= watched, "a table whose writes the answer cache would not see"
    assert {"tenants_tenant", "tenants_membership", "auth_user", "auth_user_groups", "scheduling_quota",
            "billing_invoice", "billing_invoiceline", "billing_usagerecord"} <= watched
    assert "accounts_apitoken" not in watched


def test_a_table_without_the_trigger_gets_it_from_the_install_operation() -> None:
    """What `dataversion.watch_new_tables()` runs in a migration that creates a table (no post_migrate hook)."""
    with connection.cursor() as cursor:
        cursor.execute("DROP TRIGGER gpufleet_data_changed ON tenants_membership")
    assert "tenants_membership" not in dataversion.tables_with_trigger(connection)
    assert "tenants_membership" in dataversion.install_triggers()
    assert "tenants_membership" in dataversion.tables_with_trigger(connection)
    assert dataversion.install_triggers() == []


def test_no_post_migrate_hook_installs_the_trigger() -> None:
    """The migrations install the mechanism (docs/adr/0004): `migrate`'s signal does not repair a missing one."""
    from django.core.management.sql import emit_post_migrate_signal

    with connection.cursor() as cursor:
        cursor.execute("DROP TRIGGER gpufleet_data_changed ON tenants_membership")
    try:
        emit_post_migrate_signal(verbosity=0, interactive=False, db="default")
        assert "tenants_membership" not in dataversion.tables_with_trigger(connection)
    finally:
        dataversion.install_triggers()


def test_a_catalog_change_moves_the_version_and_the_catalog_token_with_one_trigger() -> None:
    """One kind of trigger serves both caches: a catalog table's statement bumps the committed version and
    redraws the catalog's token (scheduling.catalog.revision)."""
    from scheduling.catalog import revision as catalog_revision
    from scheduling.models import Cohort

    with connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
                       "WHERE c.relname = ANY(%s) AND NOT t.tgisinternal", [list(catalog_revision.TABLES)])
        assert {row[0] for row in cursor.fetchall()} == {dataversion.TRIGGER}
    before, token = version(), catalog_revision.current(connection)
    assert token is not None
    Cohort.objects.create(name="one-trigger")
    assert version() == before + 1
    assert catalog_revision.current(connection) not in (None, token)


@pytest.mark.parametrize("write", [
    "save", "queryset update", "bulk_update", "bulk_create", "delete", "raw SQL", "m2m add", "truncate",
])
def test_every_kind_of_committed_write_moves_the_version(fleet: Fleet, write: str) -> None:
    before = version()
    tenant = Tenant.objects.get(pk=fleet.a.pk)
    if write == "save":
        tenant.display_name = "saved"
        tenant.save()
    elif write == "queryset update":
        Tenant.objects.filter(pk=tenant.pk).update(display_name="updated")
    elif write == "bulk_update":
        tenant.display_name = "bulk"
        Tenant.objects.bulk_update([tenant], ["display_name"])
    elif write == "bulk_create":
        Membership.objects.bulk_create([Membership(tenant=tenant, user=fleet.bob, role="member")])
    elif write == "delete":
        Membership.objects.filter(tenant=tenant).delete()
    elif write == "raw SQL":
        with connection.cursor() as cursor:
            cursor.execute("UPDATE auth_user SET username = 'alice2' WHERE username = 'alice'")
    elif write == "m2m add":
        factories.user("carol", roles={"billing-admin"})
    elif write == "truncate":
        with connection.cursor() as cursor:
            cursor.execute("TRUNCATE billing_usagerecord")
    assert version() > before


def test_the_version_moves_at_commit_only_and_not_for_a_rollback(fleet: Fleet) -> None:
    before = version()
    with transaction.atomic():
        Tenant.objects.filter(pk=fleet.a.pk).update(display_name="inside")
        assert version() == before  # deferred to COMMIT: no reader can see the version before the data
    after = version()
    assert after > before

    class Undo(Exception):
        pass

    with pytest.raises(Undo), transaction.atomic():
        Tenant.objects.filter(pk=fleet.a.pk).update(display_name="undone")
        raise Undo
    assert version() == after
    # Several statements in one transaction: one step.
    with transaction.atomic():
        for name in ("one", "two", "three"):
            Tenant.objects.filter(pk=fleet.a.pk).update(display_name=name)
    assert version() == after + 1


def test_reads_and_unwatched_writes_keep_the_version(fleet: Fleet) -> None:
    client = client_for(fleet.alice)
    before = version()
    assert client.get("/api/v1/tenants/").status_code == 200  # also writes the token's last_used_at
    assert ApiToken.objects.filter(user=fleet.alice, last_used_at__isnull=False).exists()
    assert version() == before


# --- the answers ----------------------------------------------------------------------------------------


def test_cached_answers_are_the_uncached_bytes(fleet: Fleet, fresh_cache: answercache.AnswerCache) -> None:
    client = client_for(fleet.alice)
    for name, path in fleet.routes(fleet.a).items():
        first = answer(client, path)
        assert first[0] == 200, name
        hits = fresh_cache.hits
        second = answer(client, path)
        assert fresh_cache.hits == hits + 1, f"{name}: the second read was not served from the cache"
        assert second == first, name
        # And the same bytes and headers as with no cache at all.
        fresh_cache.max_bytes = 0
        try:
            assert answer(client, path) == first, name
        finally:
            fresh_cache.max_bytes = answercache.DEFAULT_BYTES


def test_a_member_of_another_tenant_never_gets_the_first_callers_answer(fleet: Fleet) -> None:
    alice, bob, admin = client_for(fleet.alice), client_for(fleet.bob), client_for(fleet.admin)
    a_routes = fleet.routes(fleet.a)
    for name, path in a_routes.items():
        assert alice.get(path).status_code == 200, name
        assert alice.get(path).status_code == 200, name  # now cached
    # Bob asks the very same paths: his own scope, never Alice's cached bytes.
    for name in ("tenant detail", "quota detail", "invoice detail", "usage"):
        assert bob.get(a_routes[name]).status_code == 404, name
    for name in ("tenant list", "quota list", "invoice list"):
        body = bob.get(a_routes[name]).json()
        shown = {row.get("slug") or row.get("tenant") for row in body["results"]}
        assert shown == {"team-b"}, name
    # The admin sees both on the same paths.
    assert {row["slug"] for row in admin.get("/api/v1/tenants/").json()["results"]} == {"team-a", "team-b"}
    assert {row["slug"] for row in alice.get("/api/v1/tenants/").json()["results"]} == {"team-a"}


def test_a_session_and_an_anonymous_caller_are_keyed_apart(fleet: Fleet) -> None:
    alice = client_for(fleet.alice)
    assert alice.get("/api/v1/tenants/").status_code == 200
    assert alice.get("/api/v1/tenants/").status_code == 200
    assert APIClient().get("/api/v1/tenants/").status_code in (401, 403)
    session = APIClient()
    session.force_login(fleet.bob)
    assert {row["slug"] for row in session.get("/api/v1/tenants/").json()["results"]} == {"team-b"}


def _read_all(client: APIClient, fleet: Fleet) -> dict[str, Any]:
    out = {}
    for name, path in fleet.routes(fleet.a).items():
        response = client.get(path)
        out[name] = (response.status_code, response.json() if response.status_code == 200 else None)
        client.get(path)  # and once more, so that what is compared next is a cache candidate
    return out


WRITES = {
    # name: (the write, the routes whose answer must change)
    "tenant renamed through the action (API, portal, CLI path)": (
        lambda f: tenant_actions.update(Tenant.objects.get(pk=f.a.pk), display_name="Renamed"),
        ["tenant list", "tenant list, limit", "tenant detail"]),
    "tenant status by a task's queryset update": (
        lambda f: Tenant.objects.filter(pk=f.a.pk).update(observed_generation=99, conditions=[{"type": "X"}]),
        ["tenant list", "tenant list, limit", "tenant detail"]),
    "member added (bulk_create)": (
        lambda f: Membership.objects.bulk_create([Membership(tenant=f.a, user=f.bob, role="member")]),
        ["tenant list", "tenant list, limit", "tenant detail"]),
    "user renamed by raw SQL (shown in memberships)": (
        lambda f: connection.cursor().execute("UPDATE auth_user SET username = 'alice-2' WHERE id = %s",
                                              [f.alice.pk]),
        ["tenant list", "tenant list, limit", "tenant detail"]),
    "quota set through the action": (
        lambda f: sched.set_quota(Tenant.objects.get(pk=f.a.pk), flavor="h100", nominal=7),
        ["quota list", "quota detail"]),
    "quota bulk_update": (
        lambda f: Quota.objects.bulk_update([_with(Quota.objects.get(tenant=f.a), nominal=5)], ["nominal"]),
        ["quota list", "quota detail"]),
    "invoice line changed by a queryset update": (
        lambda f: InvoiceLine.objects.filter(invoice__tenant=f.a).update(amount=Decimal("9.99")),
        ["invoice list", "invoice detail"]),
    "invoice state by save()": (
        lambda f: _with(Invoice.objects.get(tenant=f.a), void_reason="typo").save(),
        ["invoice list", "invoice detail"]),
    "usage collected (bulk_create)": (
        lambda f: UsageRecord.objects.bulk_create([UsageRecord(
            tenant=f.a, flavor=f.flavor, hour=f.month + timedelta(days=3), unit_seconds=Decimal(60),
            gpu_equivalent_seconds=Decimal(60), collected_at=f.month + timedelta(days=4),
            window_start=f.month, window_end=f.month + timedelta(days=5))]),
        ["usage"]),
}


def _with(obj: Any, **values: Any) -> Any:
    for k, v in values.items():
        setattr(obj, k, v)
    return obj


@pytest.mark.parametrize("write", list(WRITES))
def test_a_committed_write_is_seen_by_the_next_read(fleet: Fleet, write: str) -> None:
    alice = client_for(fleet.alice)
    before = _read_all(alice, fleet)
    do, changed = WRITES[write]
    do(fleet)
    after = _read_all(alice, fleet)
    # The write's routes answer differently; the answers now equal an uncached read.
    for name in changed:
        assert after[name] != before[name], f"{name}: stale after {write}"
    cache = answercache.answer_cache()
    assert cache is not None
    cache.max_bytes = 0
    try:
        assert _read_all(alice, fleet) == after
    finally:
        cache.max_bytes = answercache.DEFAULT_BYTES


def test_a_member_removed_loses_the_cached_tenant(fleet: Fleet) -> None:
    alice = client_for(fleet.alice)
    path = f"/api/v1/tenants/{fleet.a.pk}/"
    assert alice.get(path).status_code == 200
    assert alice.get(path).status_code == 200
    Membership.objects.filter(tenant=fleet.a, user=fleet.alice).delete()
    assert alice.get(path).status_code == 404
    assert alice.get("/api/v1/tenants/").json()["results"] == []


def test_a_role_taken_away_narrows_the_cached_list(fleet: Fleet) -> None:
    admin = client_for(fleet.admin)
    assert len(admin.get("/api/v1/tenants/").json()["results"]) == 2
    assert len(admin.get("/api/v1/tenants/").json()["results"]) == 2
    from gpufleet.accounts.roles import set_platform_roles

    set_platform_roles(get_user_model().objects.get(pk=fleet.admin.pk), set())
    assert admin.get("/api/v1/tenants/").json()["results"] == []


def test_inside_a_transaction_nothing_is_cached_or_served(fleet: Fleet,
                                                          fresh_cache: answercache.AnswerCache) -> None:
    alice = client_for(fleet.alice)
    path = f"/api/v1/tenants/{fleet.a.pk}/"
    assert alice.get(path).json()["display_name"] != "uncommitted"
    alice.get(path)  # cached now
    hits = fresh_cache.hits
    with transaction.atomic():
        Tenant.objects.filter(pk=fleet.a.pk).update(display_name="uncommitted")
        assert alice.get(path).json()["display_name"] == "uncommitted"  # its own write, not the cache
        transaction.set_rollback(True)
    assert fresh_cache.hits == hits
    assert alice.get(path).json()["display_name"] != "uncommitted"  # and nothing of it was stored


def test_query_parameters_host_and_indent_are_in_the_key(fleet: Fleet) -> None:
    admin = client_for(fleet.admin)
    one = admin.get("/api/v1/tenants/?limit=1").json()
    assert len(one["results"]) == 1 and one["next"]
    assert len(admin.get("/api/v1/tenants/?limit=2").json()["results"]) == 2
    assert admin.get("/api/v1/tenants/?slug=team-b").json()["results"][0]["slug"] == "team-b"
    other_host = admin.get("/api/v1/tenants/?limit=1", HTTP_HOST="localhost").json()
    assert other_host["next"].startswith("http://localhost/")
    assert one["next"].startswith("http://testserver/")
    indented = admin.get("/api/v1/tenants/?limit=1", HTTP_ACCEPT="application/json; indent=2").content
    assert indented.startswith(b"{\n  ")
    assert admin.get("/api/v1/tenants/?limit=1").content.startswith(b'{"')


def test_a_cached_answer_costs_one_query_however_many_rows(fleet: Fleet) -> None:
    from django.test.utils import CaptureQueriesContext

    admin = client_for(fleet.admin)
    for more in (0, 5):
        for i in range(more):
            factories.tenant(f"more-{more}-{i}", "trusted", owner=fleet.bob, phase=Phase.READY)
        for name, path in fleet.routes(fleet.a).items():
            first = admin.get(path)
            assert first.status_code == 200, name
            with CaptureQueriesContext(connection) as ctx:
                assert admin.get(path).content == first.content, name
            # The token, its user's roles and the data version: one statement (accounts/tokens.py).
            assert len(ctx.captured_queries) == 1, (name, [q["sql"][:80] for q in ctx.captured_queries])


def test_concurrent_misses_of_one_answer_wait_for_the_one_computing_it() -> None:
    import threading

    cache = answercache.AnswerCache(1 << 20)
    key = ("k",)
    assert cache.get(7, key) == (None, True)  # this caller computes it
    got: list[Any] = []
    waiter = threading.Thread(target=lambda: got.append(cache.get(7, key)))
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive(), "the second caller should wait for the first"
    assert cache.put(7, key, 200, b"{}", (("Content-Type", "application/json"),))
    cache.finish(7, key, stored=True)
    waiter.join(5)
    assert got == [((200, b"{}", (("Content-Type", "application/json"),)), False)]
    # A computation that stores nothing (a 404, an error) frees its waiters to compute for themselves.
    other = ("other",)
    assert cache.get(7, other) == (None, True)
    waiter = threading.Thread(target=lambda: got.append(cache.get(7, other)))
    waiter.start()
    cache.finish(7, other, stored=False)
    waiter.join(5)
    assert got[-1] == (None, False)
    # An answer stored under an older version than the one seen last is refused.
    assert cache.get(8, key) == (None, True)
    assert not cache.put(7, key, 200, b"old", ())


def test_no_request_leaves_others_waiting(fleet: Fleet, fresh_cache: answercache.AnswerCache) -> None:
    alice = client_for(fleet.alice)
    assert alice.get(f"/api/v1/tenants/{fleet.b.pk}/").status_code == 404  # computed, not stored
    assert alice.get("/api/v1/tenants/").status_code == 200
    assert alice.get("/api/v1/billing/usage/?tenant=team-a&period=bad").status_code == 400
    assert fresh_cache._inflight == {}


def _detail(client: APIClient, fleet: Fleet) -> dict[str, Any]:
    path = f"/api/v1/tenants/{fleet.a.pk}/"
    first = client.get(path)
    assert client.get(path).content == first.content  # the second from the cache
    return dict(first.json())


@pytest.mark.parametrize("path", ["API PATCH", "portal form", "CLI", "Celery task", "Django admin"])
def test_each_write_path_of_the_product_is_seen_by_the_next_cached_read(fleet: Fleet, path: str,
                                                                        settings: Any) -> None:
    alice = client_for(fleet.alice)
    before = _detail(alice, fleet)
    if path == "API PATCH":
        assert alice.patch(f"/api/v1/tenants/{fleet.a.pk}/", {"display_name": "via API"},
                           format="json").status_code == 200
        expected = {"display_name": "via API"}
    elif path == "portal form":
        portal = APIClient()
        portal.force_login(fleet.alice)
        assert portal.post("/tenants/team-a/rename/", {"display_name": "via portal"}).status_code == 302
        expected = {"display_name": "via portal"}
    elif path == "CLI":
        from django.core.management import call_command

        call_command("tenant", "update", "team-a", "--display-name", "via CLI", stdout=io.StringIO())
        expected = {"display_name": "via CLI"}
    elif path == "Celery task":
        from tenants.tasks import reconcile_tenant

        reconcile_tenant.apply(args=[fleet.a.pk]).get()
        expected = {}
        assert Tenant.objects.get(pk=fleet.a.pk).last_reconciled_at is not None
    else:
        staff = get_user_model().objects.create_superuser("staff", "staff@example.test", "pw-for-tests")
        admin_site = APIClient()
        admin_site.force_login(staff)
        user = get_user_model().objects.get(pk=fleet.alice.pk)
        response = admin_site.post(f"/admin/auth/user/{user.pk}/change/", {
            "username": "alice-renamed", "email": user.email, "is_active": "on",
            "date_joined_0": "2026-03-01", "date_joined_1": "00:00:00", "initial-date_joined_0": "2026-03-01",
            "initial-date_joined_1": "00:00:00"})
        assert response.status_code == 302, response.content[:500]
        expected = {}
        assert get_user_model().objects.get(pk=user.pk).username == "alice-renamed"
    after = _detail(alice, fleet)
    assert after != before, f"stale after a write through the {path}"
    assert {k: after[k] for k in expected} == expected
    if path == "Django admin":
        assert [m["user"] for m in after["memberships"]] == ["alice-renamed"]
