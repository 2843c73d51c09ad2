"""Issue 8 §1: a failed git commit is never reported as applied.

Each case breaks a real repository the way a crash or a bad disk does (a stale `.git/index.lock`, a
garbage `refs/heads/main`, a folder the kernel refuses to write) and checks that the tenant's status
and the fleet sync status tell the truth: Ready only when HEAD on main holds the tenant's files.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from infra.errors import TransientError
from scheduling.clusters.sync import sync_fleet
from scheduling.models import SyncRun
from tenants import actions, reconcile
from tenants.fleet import reconcile_fleet
from tenants.models import Phase, Tenant
from tests.gitops.helpers import git, status
from tests.support import factories
from tests.support.services import missing, need_binary, need_reference

pytestmark = pytest.mark.django_db(transaction=True)


def committed(repo: Path, slug: str) -> list[str]:
    """The tenant's files in HEAD (what the cluster syncs), not in the work tree."""
    folder = f"clusters/default/tenants/{slug}/"
    return sorted(Path(p).name for p in git(repo, "ls-tree", "--name-only", "HEAD", folder).split())


def condition(tenant: Tenant, type_: str = "Ready") -> dict:
    tenant.refresh_from_db()
    return next(c for c in tenant.conditions if c["type"] == type_)


@pytest.fixture
def repo(gitops_repo: Path) -> Path:
    need_binary("git")
    need_reference()
    # The platform's objects first, so each test's only change is its tenant.
    reconcile.reconcile_platform()
    return gitops_repo


def approved(slug: str) -> Tenant:
    tenant = factories.tenant(slug, "standard")
    actions.approve(tenant)
    return tenant


def age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_index_lock_then_retry_commits_before_ready(repo: Path) -> None:
    tenant = approved("acme")
    lock = repo / ".git" / "index.lock"
    lock.write_text("")  # a git process is (or was) mid-command

    with pytest.raises(TransientError):
        reconcile.reconcile_tenant(tenant.pk)
    tenant.refresh_from_db()
    assert tenant.phase != Phase.READY
    assert condition(tenant)["reason"] == "RepositoryBusy" and condition(tenant)["status"] == "False"
    assert committed(repo, "acme") == []

    # The process holding the lock crashed long ago: the lock is stale. The retry repairs and commits.
    age(lock, 600)
    outcome = reconcile.reconcile_tenant(tenant.pk)
    tenant.refresh_from_db()
    assert tenant.phase == Phase.READY, outcome.summary
    assert not lock.exists()
    assert "namespace.core_tenant-acme.yaml" in committed(repo, "acme")
    assert status(repo) == ""


def test_files_written_but_never_committed_are_not_in_sync(repo: Path) -> None:
    """The exact sequence of the report: files written, `git add` failed, the lock went away."""
    tenant = approved("acme")
    assert reconcile.reconcile_tenant(tenant.pk).phase == Phase.READY
    # Simulate the crash after the write: roll main back one commit but keep the work tree (the
    # files gpufleet wrote are on disk, byte-identical to the render, and not in HEAD).
    git(repo, "reset", "-q", "--mixed", "HEAD~1")
    assert committed(repo, "acme") == [] and (repo / "clusters/default/tenants" / "acme").is_dir()

    result = reconcile_fleet(message="reconcile all tenants")
    assert "acme" not in result.clean  # today: "clean", 0 changes, Ready forever
    assert "namespace.core_tenant-acme.yaml" in committed(repo, "acme")
    assert status(repo) == ""
    tenant.refresh_from_db()
    assert tenant.phase == Phase.READY


def test_sync_fleet_is_not_ok_while_the_repository_is_busy(repo: Path) -> None:
    tenant = approved("acme")
    (repo / ".git" / "index.lock").write_text("")
    run = sync_fleet()
    assert run.state != SyncRun.State.OK
    assert run.repository["status"] == "False"
    assert any("RepositoryBusy" in e or "busy" in e for e in run.errors), run.errors
    tenant.refresh_from_db()
    assert tenant.phase != Phase.READY
    assert committed(repo, "acme") == []


def test_garbage_main_ref_is_repaired_from_the_reflog(repo: Path) -> None:
    tenant = approved("acme")
    good = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "pack-refs", "--all")  # the garbage must be read, not shadowed by packed-refs
    (repo / ".git" / "refs" / "heads").mkdir(parents=True, exist_ok=True)
    (repo / ".git" / "refs" / "heads" / "main").write_text("garbage\n")

    outcome = reconcile.reconcile_tenant(tenant.pk)

    tenant.refresh_from_db()
    assert tenant.phase == Phase.READY, outcome.summary
    assert git(repo, "rev-parse", "HEAD~1").strip() == good  # history continues from the last good commit
    assert "namespace.core_tenant-acme.yaml" in committed(repo, "acme")
    assert status(repo) == ""


def test_garbage_main_ref_without_reflog_is_reported_not_ready(repo: Path) -> None:
    tenant = approved("acme")
    shutil.rmtree(repo / ".git" / "logs")
    (repo / ".git" / "refs" / "heads" / "main").write_text("garbage\n")

    outcome = reconcile.reconcile_tenant(tenant.pk)

    tenant.refresh_from_db()
    assert tenant.phase == Phase.FAILED, outcome.summary
    assert condition(tenant)["reason"] == "RepositoryBroken"
    assert "refs/heads/main" in condition(tenant)["message"]
    run = sync_fleet()
    assert run.state != SyncRun.State.OK and run.repository["reason"] == "RepositoryBroken"


@contextmanager
def unwritable(folder: Path) -> Iterator[None]:
    """A folder (and its files) the kernel refuses to write: immutable as root (chmod does not stop
    root), else read-only modes."""
    paths = [folder, *folder.rglob("*")]
    if os.geteuid() == 0:
        chattr = shutil.which("chattr")
        if chattr is None:
            missing("chattr (e2fsprogs) is needed to make a folder unwritable as root")
        if subprocess.run([chattr, "-R", "+i", str(folder)], capture_output=True).returncode != 0:
            missing(f"chattr +i is not supported on {folder}'s filesystem")
        try:
            yield
        finally:
            subprocess.run([chattr, "-R", "-i", str(folder)], check=True)
    else:
        for path in paths:
            path.chmod(0o555 if path.is_dir() else 0o444)
        try:
            yield
        finally:
            for path in paths:
                path.chmod(0o755 if path.is_dir() else 0o644)


def test_unwritable_repository_sets_a_condition_on_the_tenant_and_the_sync_status(repo: Path) -> None:
    acme, beta = approved("acme"), approved("beta")
    assert reconcile.reconcile_tenant(acme.pk).phase == Phase.READY
    assert reconcile.reconcile_tenant(beta.pk).phase == Phase.READY
    actions.update(acme, trust_level="trusted")  # a new generation to write
    actions.update(beta, trust_level="trusted")

    with unwritable(repo / "clusters/default/tenants"):
        run = sync_fleet()

    for tenant in (acme, beta):
        tenant.refresh_from_db()
        assert tenant.phase != Phase.READY
        cond = condition(tenant)
        assert cond["status"] == "False" and cond["reason"] == "RepositoryUnwritable", cond
        assert "not writable" in cond["message"]
    assert run.state != SyncRun.State.OK
    assert any("RepositoryUnwritable" in e or "not writable" in e for e in run.errors), run.errors

    # Writable again: the next pass applies both and the status clears.
    again = sync_fleet()
    assert again.state == SyncRun.State.OK, again.errors
    assert again.repository["status"] == "True"
    for tenant in (acme, beta):
        tenant.refresh_from_db()
        assert tenant.phase == Phase.READY and tenant.observed_generation == tenant.generation
