"""The admin tasks done in the browser with the portal's one form style: a platform admin sets a tenant's
quota and creates a GPU node pool, a billing admin sets a price. Each page is reached by a link from where a
person looks for it, refuses every other role (403), shows an action's error next to its field and then
changes nothing, and writes through the audited action."""

from __future__ import annotations

import html
import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.test import Client

from billing.models import Price
from gpufleet import clock
from gpufleet.audit.models import AuditEvent
from scheduling.models import ClusterFlavor, Flavor, GpuModel, GpuNodePool, Quota, default_cluster_id
from tests.portal.test_forms import field_group
from tests.support import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(db) -> dict:
    model = GpuModel.objects.create(name="a100-80gb", dcgm_model_name="NVIDIA A100-SXM4-80GB", memory_mib=81920)
    a100 = Flavor.objects.create(name="a100", gpu_model=model, mode="whole", weight=1, capacity=8)
    # Offered where the tenants are placed (`default`), as create_flavor() does: quotas are checked per cluster.
    ClusterFlavor.objects.create(cluster_id=default_cluster_id(), flavor=a100, capacity=8)
    people = {
        "platform": factories.user("root", roles={"platform-admin"}),
        "billing": factories.user("finance", roles={"billing-admin"}),
        "owner": factories.user("alice"),
        "member": factories.user("bob"),
    }
    factories.tenant("acme", "standard", owner=people["owner"], phase="ready", members={"member": people["member"]})
    return people


def client_for(user) -> Client:  # type: ignore[no-untyped-def]
    client = Client()
    client.force_login(user)
    return client


def links(page: str) -> list[str]:
    return [html.unescape(href) for href in re.findall(r'href="([^"]+)"', page)]


# --- set a quota (platform admins) --------------------------------------------------------------------------


def test_platform_admin_sets_a_quota_from_the_tenant_gpu_page(world) -> None:
    admin = client_for(world["platform"])
    page = admin.get("/gpu/tenants/acme/").content.decode()
    assert "/gpu/tenants/acme/quota/" in links(page)
    form = admin.get("/gpu/tenants/acme/quota/")
    assert form.status_code == 200
    body = form.content.decode()
    assert 'name="csrfmiddlewaretoken"' in body
    assert '<label for="id_nominal">Guaranteed units (nominal quota)' in body and 'id="id_cluster_helptext"' in body
    response = admin.post("/gpu/tenants/acme/quota/", {"flavor": "a100", "cluster": "", "nominal": "4",
                                                       "borrowing_limit": "2", "lending_limit": ""})
    assert response.status_code == 302 and response["Location"] == "/gpu/tenants/acme/"
    quota = Quota.objects.get(tenant__slug="acme", flavor__name="a100")
    assert (quota.nominal, quota.borrowing_limit, quota.lending_limit) == (4, 2, None)
    assert AuditEvent.objects.filter(action="quota.set", actor_user=world["platform"]).exists()
    followed = admin.get("/gpu/tenants/acme/").content.decode()
    assert "set to 4 units" in followed
    # The quota row's edit link opens the form with the current values.
    edit = next(href for href in links(followed) if href.startswith("/gpu/tenants/acme/quota/?flavor=a100"))
    prefilled = admin.get(edit).content.decode()
    assert re.search(r'<input type="text" name="nominal" value="4"', prefilled), field_group(prefilled, "nominal")


def test_quota_errors_sit_next_to_their_field_and_change_nothing(world) -> None:
    admin = client_for(world["platform"])
    over = admin.post("/gpu/tenants/acme/quota/", {"flavor": "a100", "nominal": "9"})
    assert over.status_code == 400
    page = html.unescape(over.content.decode())
    assert "over capacity" in field_group(page, "nominal")
    assert "over capacity" not in field_group(page, "flavor")
    lend = admin.post("/gpu/tenants/acme/quota/", {"flavor": "a100", "nominal": "2", "lending_limit": "3"})
    assert lend.status_code == 400
    assert "must not exceed the nominal quota" in html.unescape(field_group(lend.content.decode(), "lending_limit"))
    assert not Quota.objects.exists()
    assert not AuditEvent.objects.filter(action="quota.set").exists()


@pytest.mark.parametrize("who", ["billing", "owner", "member"])
def test_only_platform_admins_may_set_a_quota(world, who) -> None:
    client = client_for(world[who])
    assert client.get("/gpu/tenants/acme/quota/").status_code == 403
    assert client.post("/gpu/tenants/acme/quota/", {"flavor": "a100", "nominal": "1"}).status_code == 403
    assert not Quota.objects.exists()
    if who in ("owner", "member"):
        assert "/gpu/tenants/acme/quota/" not in links(client.get("/gpu/tenants/acme/").content.decode())


def test_quota_form_needs_csrf(world) -> None:
    admin = Client(enforce_csrf_checks=True)
    admin.force_login(world["platform"])
    assert admin.post("/gpu/tenants/acme/quota/", {"flavor": "a100", "nominal": "1"}).status_code == 403
    assert not Quota.objects.exists()


# --- create a node pool (platform admins) -------------------------------------------------------------------


def test_platform_admin_creates_a_node_pool_from_the_flavors_page(world) -> None:
    admin = client_for(world["platform"])
    assert "/gpu/node-pools/new/" in links(admin.get("/gpu/flavors/").content.decode())
    form = admin.get("/gpu/node-pools/new/").content.decode()
    # Sensible defaults: 8 GPUs, on-demand, WhenEmpty after 1h.
    assert re.search(r'name="gpu_limit" value="8"', form) and re.search(r'name="consolidate_after" value="1h"', form)
    assert re.search(r'value="on-demand"[^>]*checked', form)
    assert re.search(r'<option value="WhenEmpty" selected>', form)
    response = admin.post("/gpu/node-pools/new/", {
        "name": "a100-pool", "flavor": "a100", "cluster": "", "gpu_limit": "16", "gpus_per_node": "8",
        "trust_levels": ["trusted", "standard"], "capacity_types": ["on-demand", "spot"],
        "instance_types": "p4d.24xlarge, p4de.24xlarge", "consolidation_policy": "WhenEmpty",
        "consolidate_after": "30m"})
    assert response.status_code == 302 and response["Location"] == "/gpu/flavors/"
    pool = GpuNodePool.objects.get(name="a100-pool")
    assert (pool.flavor.name, pool.gpu_limit, pool.trust_levels, pool.consolidate_after) == (
        "a100", 16, ["standard", "trusted"], "30m")
    assert pool.instance_types == ["p4d.24xlarge", "p4de.24xlarge"] and pool.capacity_types == ["on-demand", "spot"]
    assert AuditEvent.objects.filter(action="node_pool.create", actor_user=world["platform"]).exists()
    assert "Node pool a100-pool created" in admin.get("/gpu/flavors/").content.decode()


def test_node_pool_errors_sit_next_to_their_field_and_change_nothing(world) -> None:
    admin = client_for(world["platform"])
    response = admin.post("/gpu/node-pools/new/", {
        "name": "pool", "flavor": "a100", "gpu_limit": "8", "gpus_per_node": "65", "capacity_types": ["on-demand"],
        "consolidation_policy": "WhenEmptyOrUnderutilized", "consolidate_after": "soon"})
    assert response.status_code == 400
    page = html.unescape(response.content.decode())
    assert "must be between 1 and 64" in field_group(page, "gpus_per_node")
    assert "evicts running GPU pods" in field_group(page, "consolidation_policy")
    assert "must be a duration" in field_group(page, "consolidate_after")
    assert "must be between 1 and 64" not in field_group(page, "flavor")
    assert not GpuNodePool.objects.exists()
    assert not AuditEvent.objects.filter(action="node_pool.create").exists()


@pytest.mark.parametrize("who", ["billing", "owner", "member"])
def test_only_platform_admins_may_create_node_pools(world, who) -> None:
    client = client_for(world[who])
    assert client.get("/gpu/node-pools/new/").status_code == 403
    assert client.post("/gpu/node-pools/new/", {"name": "p", "flavor": "a100", "gpu_limit": "8",
                                                 "gpus_per_node": "8", "capacity_types": ["on-demand"],
                                                 "consolidation_policy": "WhenEmpty",
                                                 "consolidate_after": "1h"}).status_code == 403
    assert not GpuNodePool.objects.exists()
    assert "/gpu/node-pools/new/" not in links(client.get("/gpu/flavors/").content.decode())


# --- set a price (billing admins) ---------------------------------------------------------------------------


@pytest.mark.parametrize("who", ["billing", "platform"])
def test_billing_admin_sets_a_price_from_the_price_list(world, who) -> None:
    admin = client_for(world[who])
    assert "/billing/prices/" in links(admin.get("/billing/invoices/").content.decode())
    assert "/billing/prices/new/" in links(admin.get("/billing/prices/").content.decode())
    form = admin.get("/billing/prices/new/").content.decode()
    assert re.search(r'<option value="USD" selected>', form)  # the billing currency
    assert f'value="{clock.today().isoformat()}"' in field_group(form, "effective_from")
    start = clock.today() + timedelta(days=3)
    response = admin.post("/billing/prices/new/", {"flavor": "a100", "cluster": "", "per_unit_hour": "2.50",
                                                   "currency": "USD", "effective_from": start.isoformat()})
    assert response.status_code == 302 and response["Location"] == "/billing/prices/"
    price = Price.objects.get(flavor__name="a100")
    assert (price.per_unit_hour, price.currency, price.effective_from, price.cluster) == (
        Decimal("2.5"), "USD", start, None)
    assert AuditEvent.objects.filter(action="billing.price.set", actor_user=world[who]).exists()
    listed = admin.get("/billing/prices/").content.decode()
    assert "2.50 USD" in listed and "(announced)" in listed and "from " + start.isoformat() in listed


def test_price_errors_sit_next_to_their_field_and_change_nothing(world) -> None:
    admin = client_for(world["billing"])
    negative = admin.post("/billing/prices/new/", {"flavor": "a100", "per_unit_hour": "-1", "currency": "USD"})
    assert negative.status_code == 400
    page = negative.content.decode()
    assert "must not be negative" in field_group(page, "per_unit_hour")
    assert "must not be negative" not in field_group(page, "flavor")
    first = admin.post("/billing/prices/new/", {"flavor": "a100", "per_unit_hour": "2", "currency": "USD"})
    assert first.status_code == 302
    # A second price starting on the same day would overlap: refused next to the date, nothing written.
    overlap = admin.post("/billing/prices/new/", {"flavor": "a100", "per_unit_hour": "3", "currency": "USD",
                                                  "effective_from": clock.today().isoformat()})
    assert overlap.status_code == 400
    assert "cannot be changed retroactively" in html.unescape(field_group(overlap.content.decode(), "effective_from"))
    assert list(Price.objects.values_list("per_unit_hour", flat=True)) == [Decimal(2)]
    assert AuditEvent.objects.filter(action="billing.price.set").count() == 1


@pytest.mark.parametrize("who", ["owner", "member"])
def test_tenant_members_see_prices_but_may_not_set_them(world, who) -> None:
    client = client_for(world[who])
    listed = client.get("/billing/prices/")
    assert listed.status_code == 200 and "/billing/prices/new/" not in links(listed.content.decode())
    assert client.get("/billing/prices/new/").status_code == 403
    assert client.post("/billing/prices/new/", {"flavor": "a100", "per_unit_hour": "2",
                                                "currency": "USD"}).status_code == 403
    assert not Price.objects.exists()


def test_no_form_page_links_into_the_api(world) -> None:
    admin = client_for(world["platform"])
    for url in ("/gpu/tenants/acme/quota/", "/gpu/node-pools/new/", "/billing/prices/", "/billing/prices/new/"):
        page = admin.get(url).content.decode()
        assert not [href for href in links(page) if href.startswith("/api/")], url
        ids = re.findall(r'<(?:input|select|textarea)(?![^>]*type="(?:hidden|submit)")[^>]*\bid="([^"]+)"', page)
        for field_id in ids:
            assert f'for="{field_id}"' in page, (url, field_id)
