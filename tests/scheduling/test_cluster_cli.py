"""`gpufleet cluster add|list|show|offer|drain-placements`: three clusters (training, inference, an
untrusted-only dev cluster); bad input is one line per field; draining goes through reviewed requests."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from gpufleet.audit.models import AuditEvent
from scheduling import actions
from scheduling.clusters import placement_actions
from scheduling.clusters.models import Cluster, Placement, PlacementChangeRequest
from scheduling.clusters.placement_actions import leaving
from tests.support import factories

pytestmark = pytest.mark.django_db


def cli(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue()


@pytest.fixture
def three(db):
    cli("cluster", "add", "training", "--purpose", "training", "--region", "eu-west-1", "--region-name", "Ireland",
        "--zone", "eu-west-1a", "--kubeconfig-secret", "training-kubeconfig", "--metrics-label", "training")
    cli("cluster", "add", "inference", "--purpose", "inference", "--region", "us-east-1")
    cli("cluster", "add", "dev", "--purpose", "dev", "--trust-level", "untrusted")
    return {c.name: c for c in Cluster.objects.all()}


def active(tenant) -> list[tuple[str, bool]]:
    return sorted((p.cluster.name, p.home) for p in Placement.objects.filter(tenant=tenant).select_related("cluster")
                  if not leaving(p))


def place(tenant, cluster: str, action: str = "add") -> None:
    placement_actions.approve_placement_change(
        placement_actions.propose_placement_change(tenant, cluster=cluster, action=action))


def test_add_list_show(three) -> None:
    listing = cli("cluster", "list")
    header, *rows = listing.splitlines()
    assert header.split() == ["NAME", "PURPOSE", "REGION", "TRUST", "REACHABLE", "LAST", "SYNC", "DRIFT",
                              "PLACEMENTS"]
    assert [r.split()[0] for r in rows] == ["default", "dev", "inference", "training"]
    dev = next(r for r in rows if r.startswith("dev"))
    assert dev.split()[:5] == ["dev", "dev", "-", "untrusted", "unknown"]
    data = json.loads(cli("cluster", "show", "training", "--json"))
    assert data["region"] == "eu-west-1" and data["zones"] == ["eu-west-1a"]
    assert data["kubeconfig_secret"] == "training-kubeconfig" and data["tree"] == "clusters/training"
    assert data["status"]["reachable"] is None and data["placements"] == []
    assert AuditEvent.objects.filter(action="cluster.create").count() == 3
    text = cli("cluster", "show", "dev")
    assert "hosts trust levels: untrusted" in text and "no placements" in text


def test_bad_input_names_the_field_and_changes_nothing(three) -> None:
    cases = {
        ("Bad_Name",): "name:",
        ("x1", "--purpose", "gaming"): "purpose: must be one of training, inference, dev, general",
        ("x2", "--trust-level", "paranoid"): "trust_levels: unknown trust level 'paranoid'",
        ("x3", "--kubeconfig-secret", "apiVersion: v1\nkind: Config"): "kubeconfig_secret: must name a Secret",
        ("x4", "--kube-api", "ftp://x"): "kube_api: must be an http(s) URL",
        ("x5", "--gitops-path", "../etc"): "gitops_path:",
        ("training",): "name: cluster 'training' already exists",
    }
    for args, message in cases.items():
        with pytest.raises(CommandError) as exc:
            cli("cluster", "add", *args)
        assert message in str(exc.value)
    assert Cluster.objects.count() == 4
    with pytest.raises(CommandError, match="no cluster named 'nope'"):
        cli("cluster", "show", "nope")


def test_offer_sets_capacity_per_cluster(three) -> None:
    model = actions.create_gpu_model("h100-80gb", "NVIDIA H100 80GB HBM3", 81559)
    actions.create_flavor("h100", gpu_model=model.name, mode="whole", capacity=8)
    assert "h100 on training: 16 units (fleet total 24)" in cli("cluster", "offer", "training", "--flavor", "h100",
                                                                "--capacity", "16")
    assert json.loads(cli("cluster", "show", "training", "--json"))["flavors"] == [{"flavor": "h100", "capacity": 16}]
    with pytest.raises(CommandError, match="capacity: must not be negative"):
        cli("cluster", "offer", "training", "--flavor", "h100", "--capacity", "-1")


def test_drain_moves_non_home_placements_through_reviewed_requests(three) -> None:
    acme = factories.tenant("acme", "standard", phase="ready")
    mallory = factories.tenant("mallory", "untrusted", phase="ready")
    place(acme, "training")
    place(mallory, "training")
    place(mallory, "dev")
    # Homes stay; the default review flow only proposes.
    proposed = json.loads(cli("cluster", "drain-placements", "training", "--json"))
    assert [(r["tenant"], r["action"], r["cluster"], r["state"]) for r in proposed["requests"]] == [
        ("acme", "remove", "training", "pending"), ("mallory", "remove", "training", "pending")]
    assert Placement.objects.filter(cluster__name="training").count() == 2
    # Draining again proposes nothing new.
    again = json.loads(cli("cluster", "drain-placements", "training", "--json"))
    assert {r["id"] for r in again["requests"]} == {r["id"] for r in proposed["requests"]}
    assert PlacementChangeRequest.objects.count() == 3 + 2  # 3 approved adds + 2 pending removes
    # Moving to the untrusted-only dev cluster is refused for the standard tenant: nothing happens at all.
    with pytest.raises(CommandError, match="to: acme: cluster 'dev' hosts only untrusted tenants"):
        cli("cluster", "drain-placements", "training", "--to", "dev", "--approve")
    assert Placement.objects.filter(cluster__name="training").count() == 2
    text = cli("cluster", "drain-placements", "training", "--to", "inference", "--approve")
    assert "approved" in text
    assert active(acme) == [("default", True), ("inference", False)]
    assert [c for c, _ in active(mallory)] == ["default", "dev", "inference"]
    # The removed placements stay, marked, until the reconcile has pruned the tenants' objects there.
    assert all(leaving(p) for p in Placement.objects.filter(cluster__name="training"))
    assert json.loads(cli("cluster", "drain-placements", "training", "--json"))["requests"] == []
    assert AuditEvent.objects.filter(action="placement.approve").count() == 3 + 4
    # The home is never drained.
    home = json.loads(cli("cluster", "drain-placements", "default", "--json"))
    assert home["skipped_homes"] == ["acme", "mallory"] and home["requests"] == []
