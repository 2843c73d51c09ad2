"""The fleet pass's memo (renders remembered by their inputs, the repository checked by tree id) with a tenant
placed on several host clusters: every placement's folder is checked, a change on one cluster re-renders and
commits only there, and one cluster failing still leaves the others reconciled and nothing wrongly remembered."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.gitops import GitOpsBackend
from scheduling.models import Placement, Quota
from tenants import fleet
from tenants.fleet import reconcile_fleet
from tenants.models import Phase, Tenant
from tests.gitops.helpers import git, status
from tests.gitops.helpers import renders as _renders
from tests.support.services import need_binary, need_reference

from .test_delivery import FailingCluster

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def warm(placed, gitops_repo: Path) -> dict[str, Tenant]:
    """acme on training (home) and inference, sandbox on dev: applied, then a pass that found nothing to do."""
    need_binary("git")
    need_reference()
    fleet.forget_renders()
    assert reconcile_fleet().errors == []
    head = git(gitops_repo, "rev-parse", "HEAD")
    assert reconcile_fleet().outcomes == []
    assert git(gitops_repo, "rev-parse", "HEAD") == head
    assert len(fleet._KNOWN) == 2
    return placed


def test_the_memo_holds_every_placement(warm, gitops_repo: Path, monkeypatch) -> None:
    calls = _renders(monkeypatch)
    result = reconcile_fleet()
    assert calls == [] and result.outcomes == []
    owners = sorted(owner for known in fleet._KNOWN.values() for owner, _ in known.token)
    assert owners == ["clusters/dev/tenant:sandbox", "clusters/inference/tenant:acme", "clusters/training/tenant:acme"]
    # The count is every object on every cluster the tenant is placed on.
    on_disk = sum(1 for _ in (gitops_repo / "clusters").glob("*/tenants/acme/*.yaml"))
    assert result.clean["acme"] == on_disk


@pytest.mark.parametrize("committed", [False, True])
def test_a_hand_edit_on_a_second_cluster_is_found(warm, gitops_repo: Path, committed: bool) -> None:
    target = sorted((gitops_repo / "clusters/inference/tenants/acme").glob("namespace*.yaml"))[0]
    original = target.read_text()
    target.write_text(original + "# edited by hand\n")
    if committed:
        git(gitops_repo, "commit", "-qam", "hand edit")
    result = reconcile_fleet()
    assert [o.tenant for o in result.outcomes] == ["acme"]
    assert target.read_text() == original and status(gitops_repo) == ""
    if committed:
        changed = git(gitops_repo, "show", "--name-only", "--format=", "HEAD").split()
        assert changed == [str(target.relative_to(gitops_repo))]


def test_a_quota_changed_on_one_cluster_is_committed_there_only(warm, gitops_repo: Path, monkeypatch) -> None:
    # Behind the event path (no generation bump): the pass notices because its inputs changed.
    Quota.objects.filter(tenant__slug="acme", cluster__name="inference").update(nominal=1)
    calls = _renders(monkeypatch)
    reconcile_fleet()
    assert calls == ["acme"]
    changed = git(gitops_repo, "show", "--name-only", "--format=", "HEAD").split()
    assert changed and all(path.startswith("clusters/inference/tenants/acme/") for path in changed)
    assert reconcile_fleet().outcomes == []


def test_a_placement_removed_is_a_new_render(warm, gitops_repo: Path, monkeypatch) -> None:
    from .conftest import change

    change(Tenant.objects.get(slug="acme"), "inference", "remove")  # a new generation: no check, a reconcile
    calls = _renders(monkeypatch)
    assert [o.tenant for o in reconcile_fleet().outcomes] == ["acme"]
    assert not (gitops_repo / "clusters/inference/tenants/acme").exists()
    assert (gitops_repo / "clusters/training/tenants/acme").is_dir()
    head = git(gitops_repo, "rev-parse", "HEAD")
    reconcile_fleet()  # the placement row is gone now (its inputs moved): one more render, nothing to commit
    assert calls == ["acme"] and git(gitops_repo, "rev-parse", "HEAD") == head
    calls.clear()
    assert reconcile_fleet().outcomes == [] and calls == []
    assert git(gitops_repo, "rev-parse", "HEAD") == head


def test_one_cluster_failing_with_a_warm_memo(warm, gitops_repo: Path, settings) -> None:
    """A hand edit on the failing cluster: acme is retried, its other cluster stays applied, and the failed
    state is not remembered -- the next pass (the cluster back) repairs it."""
    target = sorted((gitops_repo / "clusters/inference/tenants/acme").glob("namespace*.yaml"))[0]
    original = target.read_text()
    target.write_text(original + "# edited by hand\n")
    edited_training = sorted((gitops_repo / "clusters/training/tenants/acme").glob("namespace*.yaml"))[0]
    edited_training.write_text(edited_training.read_text() + "# edited too\n")
    backend = FailingCluster(GitOpsBackend(settings.GPUFLEET_GITOPS_REPO), "clusters/inference")
    result = reconcile_fleet(backend)
    acme = Tenant.objects.get(slug="acme")
    assert acme.pk in result.retry and "sandbox" in result.clean
    assert "# edited too" not in edited_training.read_text(), "the reachable cluster is repaired"
    assert target.read_text() != original, "the failing cluster was not written"
    cond = Placement.objects.get(tenant=acme, cluster__name="inference").condition("Reconciled")
    assert (cond["status"], cond["reason"]) == ("False", "ClusterUnreachable")
    assert Placement.objects.get(tenant=acme, cluster__name="training").condition("Reconciled")["status"] == "True"

    result = reconcile_fleet(GitOpsBackend(settings.GPUFLEET_GITOPS_REPO))
    assert result.errors == [] and [o.tenant for o in result.outcomes] == ["acme"]
    assert target.read_text() == original and status(gitops_repo) == ""
    assert Tenant.objects.get(slug="acme").phase == Phase.READY
    cond = Placement.objects.get(tenant=acme, cluster__name="inference").condition("Reconciled")
    assert cond["status"] == "True"
    assert reconcile_fleet().outcomes == []
