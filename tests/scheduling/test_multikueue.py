"""MultiKueue mode: the manager's and the workers' objects validate against the strict upstream Kueue
CRDs (v0.19.2), the CRDs' CEL rules and cross references hold, and no kubeconfig is ever inlined."""

from __future__ import annotations

import copy
from decimal import Decimal

import pytest

from scheduling.clusters import multikueue
from scheduling.inputs import FlavorSpec, QuotaSpec
from tenants.backends import get_schema_registry
from tenants.models import Phase
from tenants.render import TenantView
from tests.support.services import need_reference


def flavor(name: str, mode: str = "whole", mig_profile: str = "") -> FlavorSpec:
    return FlavorSpec(name=name, gpu_model="h100", product_label="NVIDIA-H100-80GB-HBM3", mode=mode,
                      mig_profile=mig_profile, memory_percent=None, cores_percent=None, weight=Decimal(1),
                      capacity=16, node_labels={}, tolerations=[], taints=[])


H100, A100 = flavor("h100"), flavor("a100")
VIEW = TenantView(slug="acme", display_name="Acme", trust_level="standard", phase="Ready", generation=1)
WORKERS = [multikueue.Worker("training"), multikueue.Worker("inference", kubeconfig_secret="inference-kubeconfig")]
QUOTAS = {"training": {"h100": QuotaSpec(8, borrowing_limit=4)},
          "inference": {"h100": QuotaSpec(2), "a100": QuotaSpec(4)},
          "elsewhere": {"h100": QuotaSpec(100)}}


def manager_tree() -> list[dict]:
    return multikueue.manager_tenant_objects(VIEW, "home", WORKERS, [H100, A100], QUOTAS)


def test_manager_and_worker_objects_validate_against_upstream_crds() -> None:
    need_reference()
    registry = get_schema_registry()
    tree = manager_tree()
    worker = multikueue.worker_tenant_objects(VIEW)
    assert registry.validate(tree) == []
    assert registry.validate(worker) == []
    assert multikueue.check(tree) == []
    kinds = sorted(m["kind"] for m in tree)
    assert kinds == ["AdmissionCheck", "ClusterQueue", "LocalQueue", "MultiKueueCluster", "MultiKueueCluster",
                     "MultiKueueConfig"]
    # Every object is the tenant's (its files only), none is the platform's.
    assert {m["metadata"]["labels"]["gpufleet.io/tenant"] for m in tree} == {"acme"}
    # The worker mirrors the manager's LocalQueue name in the same namespace (upstream requirement).
    local = next(m for m in tree if m["kind"] == "LocalQueue")
    assert (worker[0]["metadata"]["name"], worker[0]["metadata"]["namespace"]) == (
        local["metadata"]["name"], local["metadata"]["namespace"]) == ("gpu-dispatch", "tenant-acme")
    assert worker[0]["spec"] == {"clusterQueue": "tenant-acme"}


def test_a_schema_mistake_is_caught() -> None:
    """The validation above can fail: a misspelled or out-of-enum field is refused by the strict schemas."""
    need_reference()
    registry = get_schema_registry()
    bad = copy.deepcopy(manager_tree())
    mkc = next(m for m in bad if m["kind"] == "MultiKueueCluster")
    mkc["spec"]["clusterSource"]["kubeConfig"]["locationType"] = "Inline"
    config = next(m for m in bad if m["kind"] == "MultiKueueConfig")
    config["spec"]["cluster"] = config["spec"].pop("clusters")
    problems = [str(p) for p in registry.validate(bad)]
    assert any("Inline" in p for p in problems)
    assert any("cluster" in p for p in problems)


def test_credentials_are_secret_references_never_inline() -> None:
    tree = manager_tree()
    sources = {m["metadata"]["name"]: m["spec"]["clusterSource"] for m in tree if m["kind"] == "MultiKueueCluster"}
    assert sources == {
        "tenant-acme-training": {"kubeConfig": {"locationType": "Secret", "location": "multikueue-training"}},
        "tenant-acme-inference": {"kubeConfig": {"locationType": "Secret", "location": "inference-kubeconfig"}},
    }
    leaked = copy.deepcopy(tree)
    mkc = next(m for m in leaked if m["kind"] == "MultiKueueCluster")
    mkc["spec"]["clusterSource"]["kubeConfig"]["location"] = "apiVersion: v1\nkind: Config\nusers: []"
    assert any("kubeconfig content" in p for p in multikueue.check(leaked))
    path = copy.deepcopy(tree)
    next(m for m in path if m["kind"] == "MultiKueueCluster")["spec"]["clusterSource"]["kubeConfig"][
        "locationType"] = "Path"
    assert any("must come from a Secret" in p for p in multikueue.check(path))


def test_dispatch_queue_quota_is_the_workers_total_and_the_order_is_kept() -> None:
    tree = manager_tree()
    queue = next(m for m in tree if m["kind"] == "ClusterQueue")
    assert queue["metadata"]["name"] == "tenant-acme-dispatch"
    assert queue["spec"]["admissionChecksStrategy"] == {"admissionChecks": [{"name": "tenant-acme-multikueue"}]}
    gpu = queue["spec"]["resourceGroups"][0]
    quotas = {f["name"]: f["resources"][0]["nominalQuota"] for f in gpu["flavors"]}
    # training 8 + inference 2 of h100 (not "elsewhere", not a worker; no borrowing), 4 a100.
    assert quotas == {"h100": 10, "a100": 4}
    assert "cohortName" not in queue["spec"]
    config = next(m for m in tree if m["kind"] == "MultiKueueConfig")
    assert config["spec"]["clusters"] == ["tenant-acme-training", "tenant-acme-inference"]
    check = next(m for m in tree if m["kind"] == "AdmissionCheck")
    assert check["spec"] == {"controllerName": "kueue.x-k8s.io/multikueue", "parameters": {
        "apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "tenant-acme"}}


def test_suspended_tenant_holds_dispatch() -> None:
    view = TenantView(slug="acme", display_name="Acme", trust_level="standard", phase=Phase.SUSPENDED, generation=2)
    queue = multikueue.manager_tenant_objects(view, "home", WORKERS[:1], [H100], QUOTAS)[0]
    assert queue["spec"]["stopPolicy"] == "Hold"


def test_cel_rules_and_references_are_checked() -> None:
    tree = manager_tree()
    dangling = [m for m in tree if m["metadata"]["name"] != "tenant-acme-inference"]
    assert multikueue.check(dangling) == ["MultiKueueConfig tenant-acme: no MultiKueueCluster tenant-acme-inference"]
    twice = copy.deepcopy(tree)
    next(m for m in twice if m["kind"] == "MultiKueueConfig")["spec"]["clusters"] = ["tenant-acme-training"] * 2
    assert "MultiKueueConfig tenant-acme: clusters must be unique" in multikueue.check(twice)
    no_check = [m for m in tree if m["kind"] != "AdmissionCheck"]
    assert multikueue.check(no_check) == ["ClusterQueue tenant-acme-dispatch: no AdmissionCheck tenant-acme-multikueue"]
    both = copy.deepcopy(tree)
    source = next(m for m in both if m["kind"] == "MultiKueueCluster")["spec"]["clusterSource"]
    source["clusterProfileRef"] = {"name": "x"}
    assert any("exactly one of" in p for p in multikueue.check(both))


def test_bad_inputs_are_refused() -> None:
    assert multikueue.manager_tenant_objects(VIEW, "home", [], [H100], QUOTAS) == []
    with pytest.raises(ValueError, match="listed twice"):
        multikueue.manager_tenant_objects(VIEW, "home", [WORKERS[0], WORKERS[0]], [H100], QUOTAS)
    with pytest.raises(ValueError, match="at most 20"):
        multikueue.manager_tenant_objects(VIEW, "home", [multikueue.Worker(f"w{i}") for i in range(21)], [H100],
                                          QUOTAS)
    with pytest.raises(ValueError, match="worker of itself"):
        multikueue.manager_tenant_objects(VIEW, "home", [multikueue.Worker("home")], [H100], QUOTAS)
