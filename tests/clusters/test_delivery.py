"""Delivery per host cluster: one GitOps tree per cluster, valid against the upstream schemas; one cluster's
backend failing marks its own placements and leaves the others reconciled."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.errors import UnreachableError
from infra.gitops import GitOpsBackend
from infra.manifests import Owner
from scheduling.models import Cluster, Placement, Quota
from tenants import actions as tenant_actions
from tenants.backends import get_schema_registry
from tenants.fleet import reconcile_fleet
from tenants.models import Phase, Tenant
from tests.gitops.helpers import git
from tests.support.services import need_binary, need_reference

pytestmark = pytest.mark.django_db(transaction=True)


def objects(folder: Path) -> dict[str, dict]:
    return {p.name: yaml.safe_load(p.read_text()) for p in sorted(folder.glob("*.yaml"))} if folder.is_dir() else {}


def kinds(folder: Path) -> set[str]:
    return {o["kind"] for o in objects(folder).values()}


def queue_flavors(folder: Path) -> set[str]:
    queue = next(o for o in objects(folder).values() if o["kind"] == "ClusterQueue")
    return {f["name"] for group in queue["spec"]["resourceGroups"] for f in group["flavors"]} - {"gpufleet-host"}


def resource_flavors(folder: Path) -> set[str]:
    names = {o["metadata"]["name"] for o in objects(folder).values() if o["kind"] == "ResourceFlavor"}
    return names - {"gpufleet-host"}


def test_each_cluster_gets_its_own_valid_tree(placed, gitops_repo: Path) -> None:
    need_binary("git")
    need_reference()
    result = reconcile_fleet()
    assert result.errors == [] and {o.tenant for o in result.outcomes} == {"acme", "sandbox"}
    root = gitops_repo / "clusters"
    assert sorted(p.name for p in root.iterdir()) == ["dev", "inference", "training"]
    assert not (gitops_repo / "tenants").exists() and not (gitops_repo / "platform").exists()

    # Every cluster's tree is valid against the upstream schemas, and every kind is one the registry knows
    # (an unknown kind would pass validation unchecked).
    registry = get_schema_registry()
    for cluster in ("training", "inference", "dev"):
        docs = [o for p in sorted((root / cluster).rglob("*.yaml")) for o in [yaml.safe_load(p.read_text())]]
        assert docs, cluster
        assert registry.validate(docs) == [], cluster
        unknown = {o["kind"] for o in docs
                   if "/" in o["apiVersion"] and not registry.knows(o["apiVersion"].rpartition("/")[0], o["kind"])}
        assert unknown == set(), cluster

    # The platform's objects per cluster: only the flavors offered there, only its node pools.
    assert resource_flavors(root / "training/platform") == {"h100", "h100-3g"}
    assert resource_flavors(root / "inference/platform") == {"l4"}
    assert resource_flavors(root / "dev/platform") == {"l4"}
    pools = {c: {o["metadata"]["name"] for o in objects(root / c / "platform").values() if o["kind"] == "NodePool"}
             for c in ("training", "inference", "dev")}
    assert pools == {"training": {"train-h100"}, "inference": {"inference-l4"}, "dev": {"dev-l4"}}
    dev_pool = next(o for o in objects(root / "dev/platform").values() if o["kind"] == "NodePool")
    taints = dev_pool["spec"]["template"]["spec"]["taints"]
    assert {"key": "gpufleet.io/trust-levels", "value": "untrusted", "effect": "NoSchedule"} in taints

    # acme: home training, also on inference; a vCluster on each (issue 26: the tenant's kubectl reaches every
    # placement), queues on training and inference with that cluster's flavors only.
    acme_training, acme_inference = root / "training/tenants/acme", root / "inference/tenants/acme"
    assert "HelmRelease" in kinds(acme_training) and "HelmRelease" in kinds(acme_inference)
    assert {"Namespace", "ClusterQueue", "LocalQueue"} <= kinds(acme_inference)
    assert queue_flavors(acme_training) == {"h100", "h100-3g"}
    assert queue_flavors(acme_inference) == {"l4"}
    assert not (root / "dev/tenants/acme").exists(), "a standard tenant never lands on the untrusted-only cluster"
    # sandbox (untrusted): only on dev; its vCluster tolerates the pool reserved for untrusted tenants.
    assert [p.name for p in (root / "training/tenants").iterdir()] == ["acme"]
    release = next(o for o in objects(root / "dev/tenants/sandbox").values() if o["kind"] == "HelmRelease")
    assert "gpufleet.io/trust-levels=untrusted:NoSchedule" in \
        release["spec"]["values"]["sync"]["toHost"]["pods"]["enforceTolerations"]
    acme_release = next(o for o in objects(acme_training).values() if o["kind"] == "HelmRelease")
    assert "trust-levels" not in str(acme_release["spec"]["values"])
    assert queue_flavors(root / "dev/tenants/sandbox") == {"l4"}
    # Labels do not depend on the cluster: the same tenant is selected alike everywhere.
    ns = [o for f in (acme_training, acme_inference) for o in objects(f).values() if o["kind"] == "Namespace"]
    assert len(ns) == 2 and ns[0]["metadata"]["labels"] == ns[1]["metadata"]["labels"]

    for placement in Placement.objects.all():
        assert placement.condition("Reconciled")["status"] == "True", placement
    assert set(Cluster.objects.values_list("name", "reachable")) == {
        ("training", True), ("inference", True), ("dev", True)}
    assert reconcile_fleet().outcomes == [], "the next pass is a no-op"


class FailingCluster:
    """The real GitOps backend, except that one cluster's owners fail as if its API never answered."""

    def __init__(self, inner: GitOpsBackend, tree: str) -> None:
        self.inner, self.tree, self.tried = inner, tree, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def apply(self, owner: str, manifests: list, *, message: str = "") -> Any:
        if Owner.parse(owner).tree == self.tree:
            self.tried += 1
            raise UnreachableError(f"{self.tree}: connection refused")
        return self.inner.apply(owner, manifests, message=message)


def test_one_cluster_failing_leaves_the_others_reconciled(placed, gitops_repo: Path, settings) -> None:
    need_binary("git")
    need_reference()
    backend = FailingCluster(GitOpsBackend(settings.GPUFLEET_GITOPS_REPO), "clusters/inference")
    result = reconcile_fleet(backend)

    root = gitops_repo / "clusters"
    assert backend.tried >= 2, "the platform and acme were both tried on inference"
    assert (root / "training/platform").is_dir() and (root / "dev/platform").is_dir()
    assert not (root / "inference").exists()
    assert (root / "training/tenants/acme").is_dir(), "acme's other cluster is reconciled"
    sandbox = Tenant.objects.get(slug="sandbox")
    assert sandbox.phase == Phase.READY, "a tenant not on the failing cluster is untouched by it"
    acme = Tenant.objects.get(slug="acme")
    assert acme.pk in result.retry and acme.phase != Phase.READY
    assert any("inference" in e for e in result.errors) and any(e.startswith("platform:") for e in result.errors)
    cond = Placement.objects.get(tenant=acme, cluster__name="inference").condition("Reconciled")
    assert (cond["status"], cond["reason"]) == ("False", "ClusterUnreachable")
    assert "connection refused" in cond["message"]
    assert Placement.objects.get(tenant=acme, cluster__name="training").condition("Reconciled")["status"] == "True"
    assert Cluster.objects.get(name="inference").reachable is False
    assert Cluster.objects.get(name="training").reachable is True

    # The cluster answers again: the next pass repairs it and nothing else changes.
    result = reconcile_fleet(GitOpsBackend(settings.GPUFLEET_GITOPS_REPO))
    assert result.errors == [] and [o.tenant for o in result.outcomes] == ["acme"]
    assert Tenant.objects.get(slug="acme").phase == Phase.READY
    cond = Placement.objects.get(tenant=acme, cluster__name="inference").condition("Reconciled")
    assert (cond["status"], cond["reason"]) == ("True", "Applied")
    assert Cluster.objects.get(name="inference").reachable is True


def test_a_placement_the_cluster_no_longer_admits_is_pruned_and_marked(placed, gitops_repo: Path) -> None:
    need_binary("git")
    need_reference()
    reconcile_fleet()
    assert (gitops_repo / "clusters/dev/tenants/sandbox").is_dir()
    # The platform admin raises sandbox's trust: dev hosts only untrusted tenants, so nothing of it may stay.
    tenant_actions.update(Tenant.objects.get(slug="sandbox"), trust_level="standard")
    reconcile_fleet()
    assert not (gitops_repo / "clusters/dev/tenants/sandbox").exists()
    cond = Placement.objects.get(tenant__slug="sandbox", cluster__name="dev").condition("Reconciled")
    assert (cond["status"], cond["reason"]) == ("False", "TrustNotAllowed")


def test_removing_a_placement_prunes_that_cluster_only(placed, gitops_repo: Path) -> None:
    from .conftest import change

    need_binary("git")
    need_reference()
    reconcile_fleet()
    assert (gitops_repo / "clusters/inference/tenants/acme").is_dir()
    change(Tenant.objects.get(slug="acme"), "inference", "remove")
    outcome = reconcile_fleet()
    assert [o.tenant for o in outcome.outcomes] == ["acme"]
    assert not (gitops_repo / "clusters/inference/tenants/acme").exists()
    assert (gitops_repo / "clusters/training/tenants/acme").is_dir()
    # Pruned there: the placement is gone, and with it acme's quotas on inference.
    assert list(Placement.objects.filter(tenant__slug="acme").values_list("cluster__name", flat=True)) == [
        "training"]
    assert not Quota.objects.filter(tenant__slug="acme", cluster__name="inference").exists()
    head = git(gitops_repo, "rev-parse", "HEAD")
    reconcile_fleet()
    assert reconcile_fleet().outcomes == [] and git(gitops_repo, "rev-parse", "HEAD") == head
