"""Proposal branches on a real repository: propose, diff, merge (one commit, one owner), discard, conflicts."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.errors import PermanentError
from infra.gitops import GitOpsBackend, branches
from tests.support.services import need_binary

from .helpers import commits, config_map, files_in_commit, git, status


@pytest.fixture
def backend(tmp_path: Path) -> GitOpsBackend:
    need_binary("git")
    backend = GitOpsBackend(tmp_path / "repo")
    backend.apply("platform", [config_map("platform", "flavors", a100="8")], message="platform")
    for slug in ("acme", "beta"):
        owner = f"tenant:{slug}"
        backend.apply(owner, [config_map(owner, "queue", gpus="4"), config_map(owner, "local", q="x")])
    return backend


def proposed(slug: str = "acme", gpus: str = "8") -> list[dict]:
    owner = f"tenant:{slug}"
    # Change one object, drop one, add one: merge must carry all three kinds of change.
    return [config_map(owner, "queue", gpus=gpus), config_map(owner, "cohort", cohort="research")]


def main_head(repo: Path) -> str:
    return git(repo, "rev-parse", "main").strip()


def test_propose_leaves_main_untouched_and_diff_shows_the_change(backend: GitOpsBackend) -> None:
    repo = backend.path
    head, tree_before = main_head(repo), sorted(p.name for p in (repo / "tenants/acme").iterdir())

    commit = branches.propose(repo, "quota/1", "tenant:acme", proposed(), "quota change 1 for acme")

    assert main_head(repo) == head
    assert sorted(p.name for p in (repo / "tenants/acme").iterdir()) == tree_before
    assert status(repo) == ""
    assert git(repo, "rev-parse", "quota/1").strip() == commit
    assert git(repo, "rev-parse", "quota/1^").strip() == head
    assert files_in_commit(repo, "quota/1") == [
        "tenants/acme/configmap.core_tenant-acme_cohort.yaml",
        "tenants/acme/configmap.core_tenant-acme_local.yaml",
        "tenants/acme/configmap.core_tenant-acme_queue.yaml",
    ]
    patch = branches.diff(repo, "quota/1")
    assert "-  gpus: '4'" in patch and "+  gpus: '8'" in patch
    assert "deleted file mode" in patch and "new file mode" in patch
    assert "tenants/beta" not in patch and "platform/" not in patch


def test_merge_is_exactly_one_commit_touching_only_the_owner(backend: GitOpsBackend) -> None:
    repo = backend.path
    branches.propose(repo, "quota/2", "tenant:acme", proposed(), "quota change 2")
    before = commits(repo)

    revision = branches.merge(repo, "quota/2", "approve quota change 2 (by admin: looks fine)")

    assert commits(repo) == before + 1
    assert main_head(repo) == revision
    touched = files_in_commit(repo, revision)
    assert touched and all(path.startswith("tenants/acme/") for path in touched)
    assert git(repo, "log", "-1", "--format=%s").strip() == "approve quota change 2 (by admin: looks fine)"
    assert "gpus: '8'" in (repo / "tenants/acme/configmap.core_tenant-acme_queue.yaml").read_text()
    assert not (repo / "tenants/acme/configmap.core_tenant-acme_local.yaml").exists()
    assert status(repo) == ""
    # The reconciler agrees with what was merged: applying the same desired state is a no-op, no drift.
    after = backend.apply("tenant:acme", proposed())
    assert not after.changed and after.drifted == []
    # Merging again (a retried task) changes nothing.
    assert branches.merge(repo, "quota/2", "again") == revision
    assert commits(repo) == before + 1


def test_merge_after_unrelated_change_on_main_squashes_onto_current_main(backend: GitOpsBackend) -> None:
    repo = backend.path
    branches.propose(repo, "quota/3", "tenant:acme", proposed(), "quota change 3")
    backend.apply("tenant:beta", [config_map("tenant:beta", "queue", gpus="1")], message="beta changed")
    beta_head = main_head(repo)

    revision = branches.merge(repo, "quota/3", "approve 3")

    assert git(repo, "rev-parse", f"{revision}^").strip() == beta_head
    assert all(p.startswith("tenants/acme/") for p in files_in_commit(repo, revision))
    assert "gpus: '1'" in (repo / "tenants/beta/configmap.core_tenant-beta_queue.yaml").read_text()


def test_discard_leaves_main_unchanged(backend: GitOpsBackend) -> None:
    repo = backend.path
    head, count = main_head(repo), commits(repo)
    branches.propose(repo, "quota/4", "tenant:acme", proposed(), "quota change 4")

    branches.discard(repo, "quota/4")

    assert main_head(repo) == head and commits(repo) == count and status(repo) == ""
    assert not branches.exists(repo, "quota/4")
    assert "quota/4" not in git(repo, "branch", "--list")


def test_conflict_when_main_changed_the_same_owner(backend: GitOpsBackend) -> None:
    repo = backend.path
    branches.propose(repo, "quota/5", "tenant:acme", proposed(gpus="8"), "quota change 5")
    backend.apply("tenant:acme", [config_map("tenant:acme", "queue", gpus="6")], message="direct edit")
    head = main_head(repo)

    with pytest.raises(PermanentError, match=r"main changed tenants/acme after proposal quota/5.*re-propose"):
        branches.merge(repo, "quota/5", "approve 5")
    assert main_head(repo) == head and status(repo) == ""

    # The rule: re-propose (same branch name, rendered again) and merge the new proposal.
    branches.propose(repo, "quota/5", "tenant:acme", proposed(gpus="8"), "quota change 5, re-proposed")
    revision = branches.merge(repo, "quota/5", "approve 5")
    assert git(repo, "rev-parse", f"{revision}^").strip() == head


def test_unknown_branch_and_bad_names_are_clear_errors(backend: GitOpsBackend) -> None:
    repo = backend.path
    for call in (branches.diff, branches.discard):
        with pytest.raises(PermanentError, match="no proposal branch 'quota/404'"):
            call(repo, "quota/404")
    with pytest.raises(PermanentError, match="no proposal branch"):
        branches.merge(repo, "quota/404", "x")
    for bad in ("main", "quota/../x", "Quota 1", "-x"):
        with pytest.raises(PermanentError, match="not a valid proposal branch name"):
            branches.propose(repo, bad, "tenant:acme", proposed(), "x")


def test_a_branch_not_made_by_propose_is_refused(backend: GitOpsBackend) -> None:
    repo = backend.path
    git(repo, "branch", "quota/6")
    with pytest.raises(PermanentError, match="not a gpufleet proposal"):
        branches.merge(repo, "quota/6", "x")
