"""Issue 11 §4: why is my workload pending? Each reason from Kueue Workload / KAI PodGroup status on the
Kubernetes emulator plus the platform's quota, cohort and node-pool state; CLI, API, portal; tenant A
never sees tenant B's workloads."""

from __future__ import annotations

import copy
import json
from io import StringIO
from typing import Any

import pytest
import yaml
from django.core.management import call_command

from infra.kube.nodes import ClusterOps
from scheduling import actions
from scheduling.pending import sources as pending_sources
from scheduling.render import cluster_queue_name
from tenants.models import Phase
from tests.support import factories
from tests.support.services import REFERENCE_DIR

from .conftest import create

pytestmark = pytest.mark.django_db
KUEUE = "/apis/kueue.x-k8s.io/v1beta2"


def _reference(path: str) -> dict[str, Any]:
    return yaml.safe_load((REFERENCE_DIR / path).read_text())


@pytest.fixture
def world(kube, kube_backend, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    model = actions.create_gpu_model("h100-80gb", "NVIDIA H100 80GB HBM3", 81559, "NVIDIA-H100-80GB-HBM3")
    actions.create_flavor("h100", gpu_model=model.name, mode="whole", capacity=32)
    actions.create_flavor("h100-3g", gpu_model=model.name, mode="mig", mig_profile="3g.40gb", capacity=14)
    actions.create_cohort("research")
    owner_a, owner_b = factories.user("ann"), factories.user("bob")
    alpha = factories.tenant("alpha", "standard", owner=owner_a, phase=Phase.READY)
    lender = factories.tenant("lender", "standard", phase=Phase.READY)
    beta = factories.tenant("beta", "untrusted", owner=owner_b, phase=Phase.READY)
    for tenant in (alpha, lender):
        actions.set_tenant_scheduling(tenant, cohort="research")
    actions.set_quota(alpha, flavor="h100", nominal=4)
    actions.set_quota(lender, flavor="h100", nominal=8, lending_limit=2)
    actions.set_quota(beta, flavor="h100", nominal=2)
    actions.create_node_pool("h100-pool", flavor="h100", gpu_limit=16, instance_types=["p5.48xlarge"])
    # Kueue's view of the queues: alpha holds its 4, lender holds 3 of 8 (5 unused, lends at most 2).
    for slug, held in (("alpha", 4), ("lender", 3), ("beta", 0)):
        create(kube.url, f"{KUEUE}/clusterqueues", {
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": cluster_queue_name(slug)},
            "spec": {}, "status": {"flavorsReservation": [
                {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "total": str(held), "borrowed": "0"}]}]}})
    for i in range(2):  # the pool's nodes: 16 GPUs, its limit
        create(kube.url, "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": f"h100-{i}", "labels": {"gpufleet.io/node-pool": "h100-pool", "gpufleet.io/flavor": "h100"}},
            "status": {"capacity": {"nvidia.com/gpu": "8"}, "allocatable": {"nvidia.com/gpu": "8"}}})
    ops = ClusterOps(kube_backend)
    monkeypatch.setattr(pending_sources, "cluster_ops", lambda: ops)
    return {"alpha": alpha, "beta": beta, "lender": lender, "owner_a": owner_a, "owner_b": owner_b, "url": kube.url}


def _workload(namespace: str, name: str, conditions: list[dict[str, str]], *, flavor: str = "",
              owner: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": owner, "uid": "j-1"}]
    status: dict[str, Any] = {"conditions": [{"lastTransitionTime": "2026-11-30T10:00:00Z", **c}
                                             for c in conditions]}
    if flavor:
        status["admission"] = {"clusterQueue": "tenant-alpha", "podSetAssignments": [
            {"name": "main", "flavors": {"nvidia.com/gpu": flavor}, "count": 2}]}
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": meta,
            "spec": {"queueName": "gpu", "podSets": [{"name": "main", "count": 2, "template": {"spec": {
                "containers": [{"name": "c", "image": "x"}]}}}]}, "status": status}


def _pending(message: str, reason: str = "Pending") -> list[dict[str, str]]:
    return [{"type": "QuotaReserved", "status": "False", "reason": reason, "message": message}]


ADMITTED = [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
             "message": "Quota reserved in ClusterQueue tenant-alpha"},
            {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "The workload is admitted"}]


def _why(tenant: str, name: str) -> dict[str, Any]:
    out = StringIO()
    call_command("workload", "why", "--tenant", tenant, name, "--json", stdout=out)
    return json.loads(out.getvalue())


def test_insufficient_quota_with_what_the_cohort_can_lend(world) -> None:
    create(world["url"], f"{KUEUE}/namespaces/tenant-alpha/workloads", _workload(
        "tenant-alpha", "job-train-5f8d2", _pending(
            "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h100, "
            "4 more needed"), owner="train"))
    why = _why("alpha", "train")  # the Job's name finds its Workload
    assert why["reason"] == "quota" and why["pending"] is True
    assert why["sentence"] == (
        "job-train-5f8d2 waits for quota in flavor h100: it needs 4 more nvidia.com/gpu than its queue has unused "
        "(nominal 4, 4 in use); only 2 borrowable from cohort research now (lending limits keep 3 unused back).")
    assert why["next_step"].endswith("ask for 2 more h100 quota (gpufleet quota propose alpha --flavor h100 "
                                     "--nominal 6)")
    assert why["evidence"][1] == {"source": "cohort research", "field": "unused quota in h100", "value": "2",
                                  "message": "lender: 5 unused, lends 2"}


def test_quota_shortfall_the_cohort_covers_now(world) -> None:
    create(world["url"], f"{KUEUE}/namespaces/tenant-alpha/workloads", _workload("tenant-alpha", "small", _pending(
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h100, "
        "2 more needed")))
    why = _why("alpha", "small")
    assert why["sentence"].endswith("; 2 are borrowable from cohort research now, so Kueue can admit it on its "
                                    "next pass.")
    # Without a cohort there is nothing to borrow, and the answer says so.
    create(world["url"], f"{KUEUE}/namespaces/tenant-beta/workloads", _workload("tenant-beta", "small", _pending(
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h100, "
        "2 more needed")))
    assert "the tenant is in no cohort, so nothing can be borrowed" in _why("beta", "small")["sentence"]


def test_request_above_what_the_queue_can_ever_hold(world) -> None:
    create(world["url"], f"{KUEUE}/namespaces/tenant-alpha/workloads", _workload("tenant-alpha", "huge", _pending(
        "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor h100, previously "
        "considered podsets requests (0) + current podset request (40) > maximum capacity (32)", "ExceedsMaxQuota")))
    why = _why("alpha", "huge")
    assert why["reason"] == "quota"
    assert "needs 40 nvidia.com/gpu in flavor h100, more than the 32 its queue can ever have" in why["sentence"]


def test_trust_level_does_not_allow_the_gpu_resource(world) -> None:
    create(world["url"], f"{KUEUE}/namespaces/tenant-beta/workloads", _workload("tenant-beta", "slice", _pending(
        "couldn't assign flavors to pod set main: resource nvidia.com/mig-3g.40gb unavailable in ClusterQueue",
        "NoMatchingFlavor")))
    why = _why("beta", "slice")
    assert why["reason"] == "trust-level"
    assert why["sentence"] == ("slice asks for nvidia.com/mig-3g.40gb, which only mig flavor(s) h100-3g provide, and "
                               "trust level untrusted does not allow mig GPUs (allowed: whole).")


def test_no_node_pool_at_its_limit_then_karpenter_provisioning(world) -> None:
    url = world["url"]
    create(url, f"{KUEUE}/namespaces/tenant-alpha/workloads", _workload("tenant-alpha", "big", ADMITTED,
                                                                        flavor="h100", owner="big"))
    create(url, "/api/v1/namespaces/tenant-alpha/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "big-0", "namespace": "tenant-alpha",
                                                        "labels": {"job-name": "big"}},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]},
        "status": {"phase": "Pending", "conditions": [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."}]}})
    why = _why("alpha", "big")
    assert why["reason"] == "no-node"
    assert ("node pool h100-pool (flavor h100) is at its GPU limit (16 of 16 GPUs), so Karpenter adds no node"
            in why["sentence"])
    assert why["evidence"][0]["message"] == "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
    create(url, "/apis/karpenter.sh/v1/nodeclaims", {
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": "h100-pool-x7k2q", "labels": {"karpenter.sh/nodepool": "h100-pool"}},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "gpu"},
                 "requirements": []},
        "status": {"conditions": [{"type": "Launched", "status": "True"}, {"type": "Ready", "status": "Unknown"}]}})
    why = _why("alpha", "big")
    assert "Karpenter is provisioning h100-pool-x7k2q in node pool h100-pool" in why["sentence"]


def test_gang_waiting_for_all_its_pods_and_gang_that_does_not_fit(world) -> None:
    url = world["url"]
    create(url, f"{KUEUE}/namespaces/tenant-alpha/workloads", _workload("tenant-alpha", "gang", ADMITTED,
                                                                        flavor="h100"))
    create(url, "/apis/scheduling.run.ai/v2alpha2/namespaces/tenant-alpha/podgroups", {
        "apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
        "metadata": {"name": "pg-gang-0", "namespace": "tenant-alpha",
                     "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "gang", "uid": "g"}]},
        "spec": {"minMember": 4, "queue": "tenant-alpha"}})
    for i in range(2):
        create(url, "/api/v1/namespaces/tenant-alpha/pods", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"gang-{i}", "namespace": "tenant-alpha",
                                                            "annotations": {"pod-group-name": "pg-gang-0"}},
            "spec": {"containers": [{"name": "c", "image": "x"}]}, "status": {"phase": "Pending"}})
    why = _why("alpha", "gang")
    assert why["reason"] == "gang"
    assert why["sentence"] == ("gang is a gang of 4 pods that start together, and only 2 exist: it waits for all "
                               "of them.")
    # KAI's own verdict (the reference data's synthetic PodGroup): room for 1 of 2 gang pods -> no node.
    group = _reference("crds/kai-scheduler/examples/podgroup-unschedulable.synthetic.yaml")
    group["metadata"]["namespace"] = "tenant-alpha"
    group["status"]["schedulingConditions"] = group["status"]["schedulingConditions"][1:]  # the node-pool one
    create(url, "/apis/scheduling.run.ai/v2alpha2/namespaces/tenant-alpha/podgroups", group)
    for i in range(2):  # both pods of this gang exist; KAI found room for one
        create(url, "/api/v1/namespaces/tenant-alpha/pods", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"llm-{i}", "namespace": "tenant-alpha",
                         "annotations": {"pod-group-name": group["metadata"]["name"]}},
            "spec": {"containers": [{"name": "c", "image": "x"}]}, "status": {"phase": "Pending"}})
    why = _why("alpha", group["metadata"]["name"])
    assert why["reason"] == "no-node"
    assert "only 1 of the 2 pods of its gang fit, and a gang starts all together or not at all" in why["sentence"]
    assert why["evidence"][0]["value"] == "PodSchedulingErrors"


def test_preempted_by_higher_priority(world) -> None:
    preempted = _reference("crds/kueue/examples/workload-evicted-preempted.synthetic.yaml")
    preempted["metadata"]["namespace"] = "tenant-alpha"
    create(world["url"], f"{KUEUE}/namespaces/tenant-alpha/workloads", preempted)
    why = _why("alpha", "inference-batch-group-1")
    assert why["reason"] == "preempted"
    assert why["sentence"] == (
        "inference-batch-group-1 was preempted at 2026-08-24T10:02:11Z to make room for a higher-priority workload "
        "(prioritization in the ClusterQueue); Kueue requeued it and it waits for quota again.")


def test_not_queued_at_all(world) -> None:
    create(world["url"], "/apis/batch/v1/namespaces/tenant-alpha/jobs", {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "notebook", "namespace": "tenant-alpha",
                                                              "labels": {"app": "notebook"}},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x"}], "restartPolicy": "Never"}}}})
    why = _why("alpha", "notebook")
    assert why["reason"] == "not-queued"
    assert why["sentence"].startswith("Job notebook is not queued at all: it has no kueue.x-k8s.io/queue-name label")
    assert why["next_step"].startswith("add the label kueue.x-k8s.io/queue-name: gpu")


def test_unknown_name_is_an_error(world) -> None:
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="no workload, job or pod named 'ghost' in tenant-alpha"):
        _why("alpha", "ghost")


def test_each_tenant_sees_only_its_own_workloads(world, api) -> None:
    url = world["url"]
    secret = _workload("tenant-alpha", "alpha-secret-run", _pending(
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h100, "
        "1 more needed"))
    create(url, f"{KUEUE}/namespaces/tenant-alpha/workloads", secret)
    beta_copy = copy.deepcopy(secret)
    beta_copy["metadata"] = {"name": "beta-run", "namespace": "tenant-beta"}
    create(url, f"{KUEUE}/namespaces/tenant-beta/workloads", beta_copy)
    api.force_authenticate(world["owner_b"])
    assert api.get("/api/v1/workloads/?tenant=alpha").status_code == 404
    assert api.get("/api/v1/workloads/alpha-secret-run/?tenant=alpha").status_code == 404
    # Asking for alpha's workload by name under beta reads only beta's namespace: not found.
    assert api.get("/api/v1/workloads/alpha-secret-run/?tenant=beta").status_code == 404
    listing = api.get("/api/v1/workloads/?tenant=beta")
    assert listing.status_code == 200
    assert [w["workload"] for w in listing.json()] == ["beta-run"]
    missing = api.get("/api/v1/workloads/")
    assert missing.status_code == 400 and missing.json()["errors"][0]["field"] == "tenant"
    api.force_authenticate(world["owner_a"])
    mine = api.get("/api/v1/workloads/alpha-secret-run/?tenant=alpha")
    assert mine.status_code == 200 and mine.json()["reason"] == "quota"
    # The portal: tenant page -> workloads, scoped the same way.
    from django.test import Client

    client = Client()
    client.force_login(world["owner_a"])
    page = client.get("/gpu/tenants/alpha/workloads/")
    assert page.status_code == 200 and b"alpha-secret-run" in page.content and b"beta-run" not in page.content
    assert client.get("/gpu/tenants/beta/workloads/").status_code == 404
    assert b"/gpu/tenants/alpha/workloads/" in client.get("/tenants/alpha/").content


def test_kai_queue_over_its_limit(world) -> None:
    """A PodGroup KAI refuses for its queue's limit (the reference data's synthetic OverLimit condition)."""
    group = _reference("crds/kai-scheduler/examples/podgroup-unschedulable.synthetic.yaml")
    group["metadata"] = {"name": "pg-limited", "namespace": "tenant-alpha"}
    group["status"]["schedulingConditions"] = group["status"]["schedulingConditions"][:1]
    create(world["url"], "/apis/scheduling.run.ai/v2alpha2/namespaces/tenant-alpha/podgroups", group)
    for i in range(2):
        create(world["url"], "/api/v1/namespaces/tenant-alpha/pods", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"limited-{i}", "namespace": "tenant-alpha",
                         "annotations": {"pod-group-name": "pg-limited"}},
            "spec": {"containers": [{"name": "c", "image": "x"}]}, "status": {"phase": "Pending"}})
    why = _why("alpha", "pg-limited")
    assert why["reason"] == "quota"
    assert why["sentence"] == ("pg-limited is over its KAI queue's quota: OverLimit: team-a quota has reached the "
                               "allowable limit of GPUs. Limit is 16 GPUs, currently 8 GPUs allocated and workload "
                               "requested 16 GPUs.")
