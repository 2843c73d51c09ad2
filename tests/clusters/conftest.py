"""Three host clusters: training and inference (standard and trusted tenants), and dev (untrusted tenants only).

The migrated cluster `default` is removed, so every object below lives on one of the three."""

from __future__ import annotations

import pytest

from scheduling import actions as sched
from scheduling.clusters import placement_actions as placing
from scheduling.models import Cluster, PlacementChangeRequest
from tenants import actions as tenant_actions
from tenants.models import Tenant
from tests.support import factories


@pytest.fixture(autouse=True)
def _reconcile_driven_by_the_test(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tests run the reconcile themselves, with the backend under test."""
    monkeypatch.setattr("tenants.actions._enqueue_reconcile", lambda tenant_id: None)
    monkeypatch.setattr("gpufleet.outbox.send.enqueue", lambda *args, **kwargs: None)


@pytest.fixture
def three_clusters(db) -> dict[str, Cluster]:
    h100 = sched.create_gpu_model("h100-80gb", "NVIDIA H100 80GB HBM3", 81559, "NVIDIA-H100-80GB-HBM3")
    l4 = sched.create_gpu_model("l4", "NVIDIA L4", 23034, "NVIDIA-L4")
    sched.create_flavor("h100", gpu_model=h100.name, mode="whole")
    sched.create_flavor("h100-3g", gpu_model=h100.name, mode="mig", mig_profile="3g.40gb")
    sched.create_flavor("l4", gpu_model=l4.name, mode="whole")
    Cluster.objects.filter(name="default").delete()  # its offers go with it; nothing else refers to it yet
    clusters = {
        "training": placing.create_cluster("training", purpose="training", region="eu-west-1",
                                           region_name="Europe (Ireland)", zones=["eu-west-1a"],
                                           trust_levels=["standard", "trusted"]),
        "inference": placing.create_cluster("inference", purpose="inference", region="us-east-1",
                                            trust_levels=["standard", "trusted"], metrics_label="inference"),
        "dev": placing.create_cluster("dev", purpose="dev", region="eu-west-1", trust_levels=["untrusted"]),
    }
    sched.set_cluster_flavor("training", "h100", capacity=16)
    sched.set_cluster_flavor("training", "h100-3g", capacity=14)
    sched.set_cluster_flavor("inference", "l4", capacity=8)
    sched.set_cluster_flavor("dev", "l4", capacity=4)
    sched.create_node_pool("train-h100", flavor="h100", gpu_limit=16, cluster="training")
    # L4 nodes of 4 GPUs (g6.12xlarge): Karpenter launches nothing where a pool's limit is below one node's GPUs.
    sched.create_node_pool("inference-l4", flavor="l4", gpu_limit=8, gpus_per_node=4, cluster="inference")
    sched.create_node_pool("dev-l4", flavor="l4", gpu_limit=4, gpus_per_node=4, cluster="dev",
                           trust_levels=["untrusted"])
    return clusters


def change(tenant: Tenant, cluster: str, action: str) -> None:
    """A reviewed placement change: proposed, then approved."""
    request = placing.propose_placement_change(tenant, cluster=cluster, action=action, reason="test")
    placing.approve_placement_change(PlacementChangeRequest.objects.get(pk=request.pk))


@pytest.fixture
def placed(three_clusters) -> dict[str, Tenant]:
    """acme (standard): home training, also on inference; sandbox (untrusted): home dev."""
    acme = factories.tenant("acme", "standard")  # no general-purpose cluster: the policy picks by name
    assert [(p.cluster.name, p.home) for p in acme.placements.all()] == [("inference", True)]
    change(acme, "training", "set-home")  # inference stays a placement, without the control plane
    sched.set_quota(acme, flavor="h100", nominal=8, cluster="training")
    sched.set_quota(acme, flavor="h100-3g", nominal=4, cluster="training")
    sched.set_quota(acme, flavor="l4", nominal=2, cluster="inference")
    sandbox = factories.tenant("sandbox", "untrusted")
    sched.set_quota(sandbox, flavor="l4", nominal=2)  # its home: dev
    for tenant in (acme, sandbox):
        tenant_actions.approve(Tenant.objects.get(pk=tenant.pk))
    return {t.slug: Tenant.objects.get(pk=t.pk) for t in (acme, sandbox)}
