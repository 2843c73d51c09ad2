"""Portal pages for clusters and the queue view: status, flavors and capacity, placements; a tenant's pages
list its placements; other tenants' placements and queue rows never show; headings and labels present."""

from __future__ import annotations

import pytest
from django.test import Client

from gpufleet import clock
from scheduling import actions
from scheduling.clusters import actions as cluster_actions
from scheduling.clusters import placement_actions
from scheduling.clusters.models import Cluster
from tests.support import factories

pytestmark = pytest.mark.django_db


def login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def world(db, settings):
    settings.GPUFLEET_METRICS_URL = ""
    cluster_actions.create_cluster("training", purpose="training", region="eu-west-1", region_name="Ireland",
                                   kubeconfig_secret="training-kubeconfig")
    cluster_actions.create_cluster("dev", purpose="dev", trust_levels=["untrusted"])
    Cluster.objects.filter(name="training").update(reachable=False, drift=3, last_sync_at=clock.now(),
                                                   status_message="connection refused")
    model = actions.create_gpu_model("h100-80gb", "NVIDIA H100 80GB HBM3", 81559)
    actions.create_flavor("h100", gpu_model=model.name, mode="whole", capacity=8)
    actions.set_cluster_flavor("training", "h100", capacity=16)
    alice, bob = factories.user("alice"), factories.user("bob")
    acme = factories.tenant("acme", "standard", phase="ready", owner=alice)
    zeta = factories.tenant("zeta", "untrusted", phase="ready", owner=bob)
    for tenant, cluster in ((acme, "training"), (zeta, "training"), (zeta, "dev")):
        placement_actions.approve_placement_change(
            placement_actions.propose_placement_change(tenant, cluster=cluster, action="add"))
    actions.set_quota(acme, flavor="h100", nominal=2)
    actions.set_quota(zeta, flavor="h100", nominal=3)
    return {"alice": login(alice), "bob": login(bob),
            "admin": login(factories.user("root", roles={"platform-admin"}))}


def test_clusters_list_and_detail_show_status_capacity_and_only_visible_placements(world) -> None:
    body = world["alice"].get("/gpu/clusters/").content.decode()
    assert "<h1>Host clusters</h1>" in body
    assert 'href="/gpu/clusters/training/"' in body and "untrusted" in body
    detail = world["alice"].get("/gpu/clusters/training/")
    text = detail.content.decode()
    assert detail.status_code == 200
    assert "<h1>Cluster training</h1>" in text and "Ireland" in text
    assert "<strong>no</strong>" in text and "3 objects" in text  # unreachable, drift 3
    # 16 installed here of the fleet's 24
    assert '<td>h100</td><td>whole</td><td>16</td><td data-figure="installed" data-flavor="h100">24</td>' in text
    assert 'href="/gpu/tenants/acme/"' in text and "zeta" not in text
    assert "training-kubeconfig" not in text  # references: platform admins only
    assert "training-kubeconfig" in world["admin"].get("/gpu/clusters/training/").content.decode()
    assert world["alice"].get("/gpu/clusters/nope/").status_code == 404


def test_tenant_pages_list_placements(world) -> None:
    for path in ("/tenants/acme/", "/gpu/tenants/acme/"):
        text = world["alice"].get(path).content.decode()
        assert 'data-testid="tenant-placements"' in text
        assert 'href="/gpu/clusters/training/"' in text and "home (virtual cluster)" in text
        assert 'href="/gpu/clusters/dev/"' not in text
    assert world["alice"].get("/gpu/tenants/zeta/").status_code == 404


def test_queue_page_shows_own_rows_per_cluster_only(world) -> None:
    text = world["alice"].get("/gpu/queue/").content.decode()
    assert "<h1>Queue across clusters</h1>" in text
    assert '<label for="queue-cluster">Cluster</label>' in text
    assert 'href="/gpu/tenants/acme/"' in text and "zeta" not in text
    assert "no metrics source configured" in text
    admin = world["admin"].get("/gpu/queue/?cluster=default").content.decode()
    assert 'href="/gpu/tenants/acme/"' in admin and 'href="/gpu/tenants/zeta/"' in admin
    assert "/api/" not in text and "/api/" not in admin
