"""Drift: a rendered file changed, deleted or added behind gpufleet's back is repaired and counted."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.gitops import GitOpsBackend
from infra.manifests import Owner
from tests.support.services import need_binary

from .helpers import commits, config_map, files_in_commit, git, status


@pytest.fixture
def backend(tmp_path: Path) -> GitOpsBackend:
    need_binary("git")
    return GitOpsBackend(tmp_path / "repo")


def desired(owner: str = "tenant:acme") -> list[dict]:
    return [config_map(owner, "a", size="1"), config_map(owner, "b", size="2")]


def test_committed_hand_edit_is_restored_and_counted(backend: GitOpsBackend) -> None:
    first = backend.apply("tenant:acme", desired(), message="tenant acme: reconcile")
    assert len(first.created) == 2 and first.drifted == []
    repo = backend.path
    target = repo / "tenants/acme/configmap.core_tenant-acme_a.yaml"
    original = target.read_bytes()
    target.write_text(target.read_text().replace("size: '1'", "size: '99'"))
    git(repo, "commit", "-q", "-am", "hot fix by hand")
    before = commits(repo)

    result = backend.apply("tenant:acme", desired(), message="tenant acme: reconcile")

    assert result.drifted == ["tenants/acme/configmap.core_tenant-acme_a.yaml"]
    assert result.updated == result.drifted
    assert target.read_bytes() == original
    assert commits(repo) == before + 1
    assert "repair drift" in git(repo, "log", "-1", "--format=%s")
    assert files_in_commit(repo) == ["tenants/acme/configmap.core_tenant-acme_a.yaml"]
    # Repaired means repaired: the next apply finds nothing.
    again = backend.apply("tenant:acme", desired(), message="tenant acme: reconcile")
    assert again.drifted == [] and not again.changed and commits(repo) == before + 1


def test_uncommitted_edit_and_deleted_file_are_restored(backend: GitOpsBackend) -> None:
    backend.apply("tenant:acme", desired())
    repo = backend.path
    (repo / "tenants/acme/configmap.core_tenant-acme_a.yaml").write_text("edited: true\n")
    (repo / "tenants/acme/configmap.core_tenant-acme_b.yaml").unlink()
    before = commits(repo)

    result = backend.apply("tenant:acme", desired())

    assert sorted(result.drifted) == [
        "tenants/acme/configmap.core_tenant-acme_a.yaml",
        "tenants/acme/configmap.core_tenant-acme_b.yaml",
    ]
    assert result.created == ["tenants/acme/configmap.core_tenant-acme_b.yaml"]
    # The working tree matches HEAD again; nothing was committed because HEAD never changed.
    assert status(repo) == ""
    assert commits(repo) == before


def test_deleted_and_committed_file_is_restored(backend: GitOpsBackend) -> None:
    backend.apply("tenant:acme", desired())
    repo = backend.path
    git(repo, "rm", "-q", "tenants/acme/configmap.core_tenant-acme_b.yaml")
    git(repo, "commit", "-q", "-m", "remove by hand")

    result = backend.apply("tenant:acme", desired(), message="sync")

    assert result.drifted == ["tenants/acme/configmap.core_tenant-acme_b.yaml"]
    assert (repo / "tenants/acme/configmap.core_tenant-acme_b.yaml").exists()
    assert git(repo, "log", "-1", "--format=%s").strip() == "sync: repair drift (1 objects)"


def test_hand_added_file_is_pruned_as_drift(backend: GitOpsBackend) -> None:
    backend.apply("tenant:acme", desired())
    extra = backend.path / "tenants/acme/configmap.core_tenant-acme_rogue.yaml"
    extra.write_text("kind: ConfigMap\n")
    result = backend.apply("tenant:acme", desired())
    assert result.pruned == result.drifted == ["tenants/acme/configmap.core_tenant-acme_rogue.yaml"]
    assert not extra.exists()


def test_desired_change_is_not_drift(backend: GitOpsBackend) -> None:
    backend.apply("tenant:acme", desired())
    changed = [config_map("tenant:acme", "a", size="3"), config_map("tenant:acme", "c", size="4")]
    result = backend.apply("tenant:acme", changed, message="tenant acme: reconcile generation 2")
    assert result.drifted == []
    assert len(result.updated) == 1 and len(result.created) == 1 and len(result.pruned) == 1
    assert git(backend.path, "log", "-1", "--format=%s").strip() == "tenant acme: reconcile generation 2"


def test_other_owners_drift_is_left_for_their_own_apply(backend: GitOpsBackend) -> None:
    backend.apply("tenant:acme", desired("tenant:acme"))
    backend.apply("tenant:beta", desired("tenant:beta"))
    beta_file = backend.path / "tenants/beta/configmap.core_tenant-beta_a.yaml"
    beta_file.write_text("edited: true\n")
    assert backend.apply("tenant:acme", desired("tenant:acme")).drifted == []
    assert beta_file.read_text() == "edited: true\n"
    assert len(backend.apply("tenant:beta", desired("tenant:beta")).drifted) == 1


def test_repository_without_a_record_reports_no_drift_then_tracks(backend: GitOpsBackend) -> None:
    backend.apply("tenant:acme", desired())
    # A repository written before drift tracking existed has no record: no false alarms...
    backend._index_path(Owner.parse("tenant:acme")).unlink()
    target = backend.path / "tenants/acme/configmap.core_tenant-acme_a.yaml"
    target.write_text("edited: true\n")
    first = backend.apply("tenant:acme", desired())
    assert first.drifted == [] and first.updated
    # ...and from then on the record exists, so the next edit is drift.
    target.write_text("edited again: true\n")
    assert len(backend.apply("tenant:acme", desired()).drifted) == 1


def test_apply_many_is_one_commit_and_counts_drift(backend: GitOpsBackend) -> None:
    batch = [(f"tenant:t{i}", desired(f"tenant:t{i}")) for i in range(5)]
    results = backend.apply_many(batch, message="fleet sync")
    assert commits(backend.path) == 2  # the repository's first commit, then one for all five tenants
    assert len(files_in_commit(backend.path)) == 10
    assert all(len(r.created) == 2 and r.revision for r in results.values())
    (backend.path / "tenants/t3/configmap.core_tenant-t3_b.yaml").unlink()
    results = backend.apply_many(batch, message="fleet sync")
    assert [o for o, r in results.items() if r.drifted] == ["tenant:t3"]
    assert results["tenant:t0"].revision is None and not results["tenant:t0"].changed
    again = backend.apply_many(batch, message="fleet sync")
    assert not any(r.changed or r.drifted for r in again.values())


def test_files_a_human_staged_elsewhere_stay_out_of_gpufleet_commits(backend: GitOpsBackend) -> None:
    backend.apply("tenant:acme", desired())
    notes = backend.path / "NOTES.md"
    notes.write_text("operator notes\n")
    git(backend.path, "add", "NOTES.md")

    backend.apply("tenant:acme", [config_map("tenant:acme", "a", size="5")], message="change")

    assert files_in_commit(backend.path) == [
        "tenants/acme/configmap.core_tenant-acme_a.yaml",
        "tenants/acme/configmap.core_tenant-acme_b.yaml",
    ]
    assert status(backend.path) == "A  NOTES.md\n"
