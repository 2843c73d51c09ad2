"""Placement policy with three clusters: trust first (clusters and node pools), then admin choice, purpose,
region; placement changes are reviewed and audited."""

from __future__ import annotations

from collections import Counter

import pytest

from gpufleet.audit.models import AuditEvent
from gpufleet.core.errors import ActionError
from scheduling.clusters import placement
from scheduling.clusters import placement_actions as placing
from scheduling.models import Cluster, Placement, PlacementChangeRequest, Quota
from tenants import actions as tenant_actions
from tenants.models import Tenant
from tests.support import factories

from .conftest import change

pytestmark = pytest.mark.django_db

FACTS = [
    placement.ClusterFacts("training", "training", "eu-west-1", ("standard", "trusted")),
    placement.ClusterFacts("inference", "inference", "us-east-1", ("standard", "trusted")),
    placement.ClusterFacts("dev", "dev", "eu-west-1", ("untrusted",)),
]


@pytest.mark.parametrize(("trust", "purpose", "region", "expected"), [
    ("standard", "training", "", "training"),
    ("standard", "inference", "", "inference"),
    ("trusted", "dev", "eu-west-1", "training"),  # dev does not admit trusted; region breaks the tie
    ("untrusted", "training", "", "dev"),  # the only cluster that admits untrusted tenants
    ("untrusted", "inference", "us-east-1", "dev"),
])
def test_home_follows_trust_then_purpose_then_region(trust: str, purpose: str, region: str, expected: str) -> None:
    assert placement.choose_home(FACTS, trust, purpose=purpose, region=region) == (expected, "")


def test_admin_choice_wins_over_preference_but_never_over_trust() -> None:
    assert placement.choose_home(FACTS, "standard", purpose="training", admin_choice="inference") == ("inference", "")
    name, why = placement.choose_home(FACTS, "standard", admin_choice="dev")
    assert name is None and "hosts only untrusted tenants" in why
    name, why = placement.choose_home(FACTS, "untrusted", admin_choice="training")
    assert name is None and "this tenant is untrusted" in why
    assert placement.choose_home(FACTS[:2], "untrusted") == (None, "no cluster hosts untrusted tenants")


def test_node_pools_admit_trust_levels_like_clusters() -> None:
    assert placement.allows((), "untrusted") and placement.allows(("untrusted",), "untrusted")
    assert not placement.allows(("standard", "trusted"), "untrusted")


def test_new_tenants_are_placed_by_policy(three_clusters) -> None:
    sandbox = factories.tenant("sandbox", "untrusted")
    assert [(p.cluster.name, p.home) for p in sandbox.placements.all()] == [("dev", True)]
    acme = factories.tenant("acme", "standard")
    assert acme.placements.get().cluster.name in {"training", "inference"}


def test_placements_honour_trust_on_proposal_and_on_approval(placed) -> None:
    acme, sandbox = placed["acme"], placed["sandbox"]
    assert [(p.cluster.name, p.home) for p in acme.placements.all()] == [("training", True), ("inference", False)]
    with pytest.raises(ActionError) as refused:
        placing.propose_placement_change(acme, cluster="dev", action="add")
    assert "cluster" in refused.value.errors and "hosts only untrusted" in refused.value.errors["cluster"][0]
    with pytest.raises(ActionError) as refused:
        placing.propose_placement_change(sandbox, cluster="training", action="set-home")
    assert "cluster" in refused.value.errors
    # Proposed while allowed, approved after the tenant's level changed: the approval checks trust again.
    gamma = factories.tenant("gamma", "standard")
    other = "training" if gamma.placements.get().cluster.name == "inference" else "inference"
    pending = placing.propose_placement_change(gamma, cluster=other, action="add")
    tenant_actions.update(Tenant.objects.get(pk=gamma.pk), trust_level="untrusted")
    with pytest.raises(ActionError) as refused:
        placing.approve_placement_change(pending)
    assert "this tenant is untrusted" in refused.value.errors["cluster"][0]
    assert PlacementChangeRequest.objects.get(pk=pending.pk).state == "pending"
    with pytest.raises(ActionError) as refused:
        placing.propose_placement_change(acme, cluster="training", action="remove")
    assert "move the home first" in refused.value.errors["cluster"][0]
    with pytest.raises(ActionError) as refused:
        placing.propose_placement_change(acme, cluster="nowhere", action="add")
    assert refused.value.errors == {"cluster": ["unknown cluster 'nowhere'"]}


def test_a_placement_change_is_reviewed_and_audited(placed) -> None:
    acme = placed["acme"]
    request = placing.propose_placement_change(acme, cluster="inference", action="remove", reason="no serving")
    assert Placement.objects.filter(tenant=acme, cluster__name="inference").exists(), "nothing changes before review"
    generation = Tenant.objects.get(pk=acme.pk).generation
    placing.reject_placement_change(request, comment="still serving")
    assert Placement.objects.filter(tenant=acme, cluster__name="inference").exists()
    request = placing.propose_placement_change(acme, cluster="inference", action="remove")
    placing.approve_placement_change(request)
    # Kept, marked, until the reconcile has pruned acme's objects there (tests/clusters/test_delivery.py).
    removed = Placement.objects.get(tenant=acme, cluster__name="inference")
    assert placing.leaving(removed) and removed.condition("Removing")["reason"] == "PlacementRemoved"
    assert Tenant.objects.get(pk=acme.pk).generation == generation + 1
    actions = list(AuditEvent.objects.filter(action__startswith="placement.").values_list("action", flat=True))
    # The fixture's move of the home (proposed, approved), then this test's rejected and approved removal.
    assert Counter(actions) == {"placement.propose": 3, "placement.approve": 2, "placement.reject": 1}
    with pytest.raises(Exception, match="already approved"):
        placing.approve_placement_change(PlacementChangeRequest.objects.get(pk=request.pk))


def test_exactly_one_home_per_tenant(placed) -> None:
    from django.db import IntegrityError, transaction

    acme = placed["acme"]
    with pytest.raises(IntegrityError), transaction.atomic():
        Placement.objects.filter(tenant=acme, cluster__name="inference").update(home=True)
    change(acme, "inference", "set-home")
    assert [(p.cluster.name, p.home) for p in Placement.objects.filter(tenant=acme)] == [
        ("inference", True), ("training", False)]


def test_quotas_are_per_tenant_flavor_and_cluster(placed) -> None:
    from scheduling import actions as sched

    acme, sandbox = placed["acme"], placed["sandbox"]
    with pytest.raises(ActionError) as refused:
        sched.set_quota(acme, flavor="l4", nominal=1, cluster="dev")
    assert "not placed on cluster 'dev'" in refused.value.errors["cluster"][0]
    with pytest.raises(ActionError) as refused:
        sched.set_quota(acme, flavor="l4", nominal=1, cluster="training")
    assert refused.value.errors == {"flavor": ["'l4' is not offered on cluster 'training'"]}
    with pytest.raises(ActionError) as refused:  # dev: 4 l4 entered + its pool's 4 GPUs; the fleet has 20
        sched.set_quota(sandbox, flavor="l4", nominal=9)  # on its home, dev
    assert "over capacity on cluster 'dev'" in refused.value.errors["nominal"][0]
    quota = sched.set_quota(acme, flavor="l4", nominal=6, cluster="inference")
    assert (quota.cluster.name, quota.nominal) == ("inference", 6)


def test_default_is_checked_like_any_other_cluster(db) -> None:
    """Issue 27 item 11: `default` offering 2 h100, another tenant holding 1 -- 3 more are over capacity there
    (the fleet has 16 more on `training`, so only the per-cluster check can refuse), and a standard tenant not
    placed on `default` (trusted tenants only) gets no quota row there."""
    from scheduling import actions as sched

    h100 = sched.create_gpu_model("h100-80gb", "NVIDIA H100 80GB HBM3", 81559, "NVIDIA-H100-80GB-HBM3")
    sched.create_flavor("h100", gpu_model=h100.name, mode="whole", capacity=2)  # offered on `default`
    Cluster.objects.filter(name="default").update(trust_levels=["trusted"])
    placing.create_cluster("training", purpose="training", trust_levels=["standard", "trusted"])
    sched.set_cluster_flavor("training", "h100", capacity=16)
    zeta, apex = factories.tenant("zeta", "trusted"), factories.tenant("apex", "trusted")
    assert [p.cluster.name for p in apex.placements.all()] == ["default"]  # general purpose: the policy's pick
    sched.set_quota(zeta, flavor="h100", nominal=1, cluster="default")
    with pytest.raises(ActionError) as refused:
        sched.set_quota(apex, flavor="h100", nominal=3, cluster="default")
    assert refused.value.errors["nominal"] == [
        "over capacity on cluster 'default': 'h100' offers 2 units there, other tenants hold 1, so at most 1 remain"]
    assert sched.set_quota(apex, flavor="h100", nominal=1).cluster.name == "default"  # what remains fits
    beta = factories.tenant("beta", "standard")
    assert [p.cluster.name for p in beta.placements.all()] == ["training"]
    with pytest.raises(ActionError) as refused:
        sched.set_quota(beta, flavor="h100", nominal=1, cluster="default")
    assert refused.value.errors == {"cluster": [
        "tenant 'beta' is not placed on cluster 'default' (propose a placement first)"]}
    with pytest.raises(ActionError):
        sched.propose_quota_change(beta, flavor="h100", nominal=1, cluster="default")
    assert not Quota.objects.filter(tenant=beta).exists()
