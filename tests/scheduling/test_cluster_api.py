"""/api/v1/clusters, placements, placement-requests and queue: admin writes, scoped reads, 400 naming the
field, ETag/If-Match, and tenant A never seeing tenant B's placements, requests or queue rows."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from scheduling import actions
from scheduling.clusters import actions as cluster_actions
from scheduling.clusters import placement_actions
from scheduling.clusters.models import Cluster, Placement, PlacementChangeRequest
from tests.support import factories

pytestmark = pytest.mark.django_db


def client_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def world(db, settings):
    settings.GPUFLEET_METRICS_URL = ""  # no metrics source: queue rows say so, quotas are still shown
    cluster_actions.create_cluster("training", purpose="training", region="eu-west-1",
                                   kubeconfig_secret="training-kubeconfig")
    cluster_actions.create_cluster("dev", purpose="dev", trust_levels=["untrusted"])
    alice, bob = factories.user("alice"), factories.user("bob")
    acme = factories.tenant("acme", "standard", phase="ready", owner=alice)
    zeta = factories.tenant("zeta", "untrusted", phase="ready", owner=bob)
    for tenant, cluster in ((acme, "training"), (zeta, "training"), (zeta, "dev")):
        placement_actions.approve_placement_change(
            placement_actions.propose_placement_change(tenant, cluster=cluster, action="add"))
    model = actions.create_gpu_model("h100-80gb", "NVIDIA H100 80GB HBM3", 81559)
    actions.create_flavor("h100", gpu_model=model.name, mode="whole", capacity=8)
    actions.set_quota(acme, flavor="h100", nominal=2)
    actions.set_quota(zeta, flavor="h100", nominal=3)
    admin = factories.user("root", roles={"platform-admin"})
    return {"alice": client_for(alice), "bob": client_for(bob), "admin": client_for(admin), "acme": acme,
            "zeta": zeta}


def test_admin_registers_and_changes_clusters_with_if_match(world) -> None:
    admin = world["admin"]
    created = admin.post("/api/v1/clusters/", {"name": "inference", "purpose": "inference", "region": "us-east-1",
                                               "zones": ["us-east-1a"]}, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["tree"] == "clusters/inference"
    read = admin.get("/api/v1/clusters/inference/")
    etag = read["ETag"]
    stale = admin.patch("/api/v1/clusters/inference/", {"region_name": "Virginia"}, format="json",
                        HTTP_IF_MATCH='"nope"')
    assert stale.status_code == 412
    ok = admin.patch("/api/v1/clusters/inference/", {"region_name": "Virginia"}, format="json", HTTP_IF_MATCH=etag)
    assert ok.status_code == 200 and ok.json()["region_name"] == "Virginia"
    assert ok["ETag"] != etag


@pytest.mark.parametrize(("payload", "field"), [
    ({"name": "Bad_Name"}, "name"),
    ({"name": "x", "purpose": "gaming"}, "purpose"),
    ({"name": "x", "trust_levels": ["paranoid"]}, "trust_levels"),
    ({"name": "x", "kubeconfig_secret": "-----BEGIN CERTIFICATE-----"}, "kubeconfig_secret"),
    ({"name": "x", "metrics_url": "not a url"}, "metrics_url"),
    ({"name": "x", "zones": "eu-west-1a"}, "zones"),
    ({"name": "x", "colour": "red"}, "colour"),
    ({"name": "training"}, "name"),
])
def test_bad_cluster_input_is_a_400_naming_the_field(world, payload, field) -> None:
    before = Cluster.objects.count()
    response = world["admin"].post("/api/v1/clusters/", payload, format="json")
    assert response.status_code == 400, response.content
    assert response["Content-Type"].startswith("application/problem+json")
    assert field in {e["field"] for e in response.json()["errors"]}
    assert Cluster.objects.count() == before


def test_narrowing_trust_that_would_strand_a_tenant_is_refused(world) -> None:
    response = world["admin"].patch("/api/v1/clusters/training/", {"trust_levels": ["untrusted"]}, format="json")
    assert response.status_code == 400
    assert "acme" in response.json()["fields"]["trust_levels"][0]


def test_members_read_clusters_but_not_write_nor_see_others_or_references(world) -> None:
    alice = world["alice"]
    assert alice.post("/api/v1/clusters/", {"name": "mine"}, format="json").status_code == 403
    assert alice.patch("/api/v1/clusters/training/", {"region": "x"}, format="json").status_code == 403
    training = alice.get("/api/v1/clusters/training/").json()
    assert training["placements"] == [{"tenant": "acme", "home": False}]  # not zeta's
    assert training["kubeconfig_secret"] is None
    assert world["admin"].get("/api/v1/clusters/training/").json()["kubeconfig_secret"] == "training-kubeconfig"
    listing = alice.get("/api/v1/clusters/").json()["results"]
    assert {c["name"] for c in listing} == {"default", "dev", "training"}
    assert all(p["tenant"] == "acme" for c in listing for p in c["placements"])


def test_tenant_a_cannot_see_or_change_tenant_b_placements_requests_or_queue(world) -> None:
    alice, bob = world["alice"], world["bob"]
    mine = alice.get("/api/v1/placements/").json()["results"]
    assert {(p["tenant"], p["cluster"], p["home"]) for p in mine} == {("acme", "default", True),
                                                                        ("acme", "training", False)}
    zeta_placement = Placement.objects.filter(tenant=world["zeta"]).first()
    assert alice.get(f"/api/v1/placements/{zeta_placement.pk}/").status_code == 404
    assert alice.get("/api/v1/placements/?tenant=zeta").json()["results"] == []
    # Proposing for another tenant: 404, nothing created.
    before = PlacementChangeRequest.objects.count()
    response = alice.post("/api/v1/placement-requests/", {"tenant": "zeta", "cluster": "training",
                                                          "action": "remove"}, format="json")
    assert response.status_code == 404
    assert PlacementChangeRequest.objects.count() == before
    theirs = bob.post("/api/v1/placement-requests/", {"tenant": "zeta", "cluster": "training", "action": "remove"},
                      format="json")
    assert theirs.status_code == 201
    assert alice.get(f"/api/v1/placement-requests/{theirs.json()['id']}/").status_code == 404
    assert all(r["tenant"] == "acme" for r in alice.get("/api/v1/placement-requests/").json()["results"])
    rows = alice.get("/api/v1/queue/").json()["rows"]
    assert {(r["tenant"], r["flavor"], r["cluster"]) for r in rows} == {("acme", "h100", "default")}
    assert alice.get("/api/v1/queue/?tenant=zeta").json()["rows"] == []
    admin_rows = world["admin"].get("/api/v1/queue/").json()["rows"]
    assert {r["tenant"] for r in admin_rows} == {"acme", "zeta"}
    assert all(r["metrics_error"] == "no metrics source configured" and r["admitted"] is None for r in admin_rows)


def test_placement_requests_follow_review_and_trust(world) -> None:
    alice, admin = world["alice"], world["admin"]
    refused = alice.post("/api/v1/placement-requests/", {"tenant": "acme", "cluster": "dev", "action": "add"},
                         format="json")
    assert refused.status_code == 400
    assert refused.json()["fields"]["cluster"] == ["cluster 'dev' hosts only untrusted tenants (this tenant is "
                                                   "standard)"]
    bad = alice.post("/api/v1/placement-requests/", {"tenant": "acme", "cluster": "training", "action": "move"},
                     format="json")
    assert bad.status_code == 400 and "action" in bad.json()["fields"]
    proposal = alice.post("/api/v1/placement-requests/", {"tenant": "acme", "cluster": "training",
                                                          "action": "remove", "reason": "done"}, format="json")
    assert proposal.status_code == 201 and proposal.json()["state"] == "pending"
    pk = proposal.json()["id"]
    assert alice.post(f"/api/v1/placement-requests/{pk}/approve/", {}, format="json").status_code == 403
    approved = admin.post(f"/api/v1/placement-requests/{pk}/approve/", {"comment": "ok"}, format="json")
    assert approved.status_code == 200 and approved.json()["state"] == "approved"
    removed = Placement.objects.get(tenant=world["acme"], cluster__name="training")
    assert removed.conditions[0]["type"] == "Removing"  # kept until the reconcile has pruned it there
    assert alice.get("/api/v1/queue/?cluster=training").json()["rows"] == []
    again = admin.post(f"/api/v1/placement-requests/{pk}/approve/", {}, format="json")
    assert again.status_code == 409


def test_delete_only_an_empty_cluster_and_its_capacity_goes_with_it(world) -> None:
    admin = world["admin"]
    assert world["alice"].delete("/api/v1/clusters/dev/").status_code == 403
    busy = admin.delete("/api/v1/clusters/training/")
    assert busy.status_code == 409 and "2 placements" in busy.json()["detail"]
    assert admin.delete("/api/v1/clusters/default/").status_code == 409
    actions.set_cluster_flavor("dev", "h100", capacity=4)
    assert actions.Flavor.objects.get(name="h100").capacity == 12
    zeta_dev = PlacementChangeRequest.objects.create(tenant=world["zeta"], cluster=Cluster.objects.get(name="dev"),
                                                     action="remove")
    placement_actions.approve_placement_change(zeta_dev)
    assert admin.delete("/api/v1/clusters/dev/").status_code == 409  # still being pruned there
    Placement.objects.filter(tenant=world["zeta"], cluster__name="dev").delete()  # what the prune does at the end
    assert admin.delete("/api/v1/clusters/dev/").status_code == 204
    assert not Cluster.objects.filter(name="dev").exists()
    assert actions.Flavor.objects.get(name="h100").capacity == 8


def test_quotas_per_cluster_through_the_api(world) -> None:
    admin, alice = world["admin"], world["alice"]
    actions.set_cluster_flavor("training", "h100", capacity=8)
    ok = admin.post("/api/v1/quotas/", {"tenant": "acme", "flavor": "h100", "cluster": "training", "nominal": 4},
                    format="json")
    assert ok.status_code == 200, ok.content
    assert (ok.json()["cluster"], ok.json()["nominal"]) == ("training", 4)
    # Not placed there: 400 on `cluster`.
    refused = admin.post("/api/v1/quotas/", {"tenant": "acme", "flavor": "h100", "cluster": "dev", "nominal": 1},
                         format="json")
    assert refused.status_code == 400 and "cluster" in refused.json()["fields"]
    rows = alice.get("/api/v1/quotas/?cluster=training").json()["results"]
    assert [(r["tenant"], r["cluster"], r["nominal"]) for r in rows] == [("acme", "training", 4)]
    assert alice.get("/api/v1/quotas/?tenant=zeta").json()["results"] == []
    queue = {(r["tenant"], r["cluster"]): r["nominal"] for r in alice.get("/api/v1/queue/").json()["rows"]}
    assert queue == {("acme", "default"): 2, ("acme", "training"): 4}
