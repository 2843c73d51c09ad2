"""Issue 16 §1: GitOps publishing never silently stops.

Against a REAL bare remote that already has history: the working copy is created from the remote
(also after a lost volume), the push sidecar (helm/gpufleet/files/gitops-push.sh, run as the chart
runs it: `sh -c <script>`) fetches, refuses to diverge, records each round, and exits on SIGTERM
after a final push; with push enabled a tenant is Ready only once its commit is on the remote.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from infra.errors import TransientError
from infra.gitops import publish
from infra.gitops.git import Git
from scheduling.clusters.sync import sync_fleet
from scheduling.models import SyncRun
from tenants import actions, reconcile
from tenants.models import Phase
from tests.support import factories
from tests.support.services import need_binary, need_reference

from .helpers import git

pytestmark = pytest.mark.django_db(transaction=True)

SCRIPT = Path(__file__).resolve().parents[2] / "helm" / "gpufleet" / "files" / "gitops-push.sh"


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    """A bare remote with two commits of someone's history (e.g. the repository as bootstrapped)."""
    need_binary("git")
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    seed = tmp_path / "seed"
    git(tmp_path, "clone", "-q", str(bare), str(seed))
    (seed / "README.md").write_text("# desired state (bootstrapped by hand)\n")
    git(seed, "add", "README.md")
    git(seed, "commit", "-q", "-m", "bootstrap")
    (seed / "clusters").mkdir()
    (seed / "clusters" / "flux-system.yaml").write_text("# Flux's own objects\n")
    git(seed, "add", "clusters")
    git(seed, "commit", "-q", "-m", "flux bootstrap")
    git(seed, "push", "-q", "origin", "main")
    return bare


@pytest.fixture
def pushing(settings, remote: Path) -> Path:
    need_reference()
    settings.GPUFLEET_GITOPS_REMOTE = str(remote)
    settings.GPUFLEET_GITOPS_PUSH = True
    # As in the chart: the sidecar records its rounds outside the repository (shared volume).
    settings.GPUFLEET_GITOPS_PUSH_STATUS_DIR = str(remote.parent / "push-status")
    return remote


def status_dir(repo: Path) -> Path:
    """Where the sidecar records (the `pushing` fixture's GPUFLEET_GITOPS_PUSH_STATUS_DIR)."""
    return repo.parent / "push-status"


def remote_head(remote: Path) -> str:
    return git(remote, "rev-parse", "refs/heads/main").strip()


def sidecar(repo: Path, remote: Path, interval: int = 3600) -> subprocess.Popen:
    env = {
        "PATH": os.environ["PATH"], "HOME": str(repo.parent),
        "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
        "GPUFLEET_GITOPS_REPO": str(repo), "GPUFLEET_PUSH_URL": str(remote),
        "GPUFLEET_PUSH_BRANCH": "main", "GPUFLEET_PUSH_INTERVAL": str(interval),
        "GPUFLEET_PUSH_STATUS_DIR": str(status_dir(repo)),
    }
    # Exactly the chart's container command: ["sh", "-c", <script>].
    return subprocess.Popen(["sh", "-c", SCRIPT.read_text()], env=env, stderr=subprocess.PIPE, text=True)


def one_round(repo: Path, remote: Path) -> dict:
    """Run the sidecar until it recorded a round, then stop it with SIGTERM; the recorded status."""
    status_file = status_dir(repo) / "push-status"
    status_file.unlink(missing_ok=True)
    proc = sidecar(repo, remote)
    try:
        deadline = time.monotonic() + 30
        while not status_file.exists():
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "the push sidecar recorded no round in 30 s"
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    return publish.read_status(Git(repo), True, status_dir(repo))


@pytest.fixture
def stopped() -> Iterator[list[subprocess.Popen]]:
    procs: list[subprocess.Popen] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def test_missing_working_copy_continues_the_remote_history(pushing: Path, gitops_repo: Path) -> None:
    before = remote_head(pushing)
    tenant = factories.tenant("acme", "standard")
    actions.approve(tenant)

    with pytest.raises(TransientError) as waiting:  # committed, not yet pushed: not Ready
        reconcile.reconcile_tenant(tenant.pk)
    assert waiting.value.reason == "AwaitingPush"
    tenant.refresh_from_db()
    assert tenant.phase == Phase.PROVISIONING
    assert next(c for c in tenant.conditions if c["type"] == "Ready")["reason"] == "AwaitingPush"
    # The remote's history is ours: its commits are ancestors of local main (a fast-forward push).
    assert Git(gitops_repo).probe("merge-base", "--is-ancestor", before, "HEAD")[0] == 0
    assert (gitops_repo / "clusters" / "flux-system.yaml").exists()

    status = one_round(gitops_repo, pushing)
    assert status["state"] == "ok", status
    assert remote_head(pushing) == git(gitops_repo, "rev-parse", "HEAD").strip()
    assert status["last_pushed"] == remote_head(pushing) and status["last_success_epoch"]

    outcome = reconcile.reconcile_tenant(tenant.pk)
    assert outcome.phase == Phase.READY, outcome.summary


def test_lost_volume_is_restored_from_the_remote_and_pushes_again(pushing: Path, gitops_repo: Path) -> None:
    tenant = factories.tenant("acme", "standard")
    actions.approve(tenant)
    with pytest.raises(TransientError):
        reconcile.reconcile_tenant(tenant.pk)
    assert one_round(gitops_repo, pushing)["state"] == "ok"
    assert reconcile.reconcile_tenant(tenant.pk).phase == Phase.READY
    pushed = remote_head(pushing)

    shutil.rmtree(gitops_repo)  # the volume is lost (or restored from an old snapshot: same story)
    actions.update(tenant, display_name="Acme GPU team")  # something new to publish
    factories.tenant("beta", "standard")

    run = sync_fleet()  # the recovery the guide prescribes

    assert git(gitops_repo, "merge-base", "HEAD", pushed).strip() == pushed  # history continues
    status = one_round(gitops_repo, pushing)
    assert status["state"] == "ok", status
    assert remote_head(pushing) == git(gitops_repo, "rev-parse", "HEAD").strip()
    assert run.repository["push"]["enabled"] is True


def test_rejected_push_is_a_status_and_keeps_tenants_not_ready(pushing: Path, gitops_repo: Path) -> None:
    hook = pushing / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'protected branch: pushes need review' >&2\nexit 1\n")
    hook.chmod(0o755)
    before = remote_head(pushing)
    tenant = factories.tenant("acme", "standard")
    actions.approve(tenant)
    with pytest.raises(TransientError):
        reconcile.reconcile_tenant(tenant.pk)

    status = one_round(gitops_repo, pushing)

    assert status["state"] == "rejected" and "protected branch" in str(status["message"]), status
    assert remote_head(pushing) == before
    with pytest.raises(TransientError) as waiting:
        reconcile.reconcile_tenant(tenant.pk)
    assert "not pushed" in str(waiting.value) and "rejected" in str(waiting.value)
    run = sync_fleet()
    assert run.state != SyncRun.State.OK
    assert run.repository["push"]["state"] == "rejected"
    assert any(e.startswith("push: rejected") for e in run.errors), run.errors


def test_diverged_remote_is_refused_not_forced(pushing: Path, gitops_repo: Path, tmp_path: Path) -> None:
    tenant = factories.tenant("acme", "standard")
    actions.approve(tenant)
    with pytest.raises(TransientError):
        reconcile.reconcile_tenant(tenant.pk)
    # Someone rewrites the remote's main with a history unrelated to ours.
    other = tmp_path / "other"
    git(tmp_path, "init", "-q", "-b", "main", str(other))
    (other / "x.yaml").write_text("kind: Other\n")
    git(other, "add", "x.yaml")
    git(other, "commit", "-q", "-m", "unrelated")
    git(other, "push", "-q", "--force", str(pushing), "main")
    theirs = remote_head(pushing)

    status = one_round(gitops_repo, pushing)

    assert status["state"] == "diverged", status
    assert remote_head(pushing) == theirs  # never forced
    assert "not an ancestor" in str(status["message"])


def test_sidecar_exits_on_sigterm_after_a_final_push(remote: Path, tmp_path: Path, stopped: list) -> None:
    repo = tmp_path / "work"
    Git(repo).ensure_repo(remote=str(remote))
    proc = sidecar(repo, remote, interval=3600)
    stopped.append(proc)
    status_file = status_dir(repo) / "push-status"
    deadline = time.monotonic() + 30
    while not status_file.exists():
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    (repo / "late.yaml").write_text("kind: Late\n")  # committed by the worker just before the rollout
    git(repo, "add", "late.yaml")
    git(repo, "commit", "-q", "-m", "late commit")

    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, errors = proc.communicate(timeout=20)
    code = proc.returncode

    assert code == 0, errors
    assert time.monotonic() - started < 10  # not the 3600 s interval, nor the pod's grace period
    assert remote_head(remote) == git(repo, "rev-parse", "HEAD").strip()  # the final push happened


def test_sigterm_the_instant_a_round_is_recorded_never_waits_out_the_interval(
    remote: Path, tmp_path: Path, stopped: list
) -> None:
    """The window a CI run once hit: TERM right after a round, as the wait for the next one begins.

    The status file appears at the end of a round, so a TERM sent the instant it appears lands in that
    window often; each of these stops must still take seconds, not the 3600 s interval."""
    repo = tmp_path / "work"
    Git(repo).ensure_repo(remote=str(remote))
    status_file = status_dir(repo) / "push-status"
    for attempt in range(15):
        status_file.unlink(missing_ok=True)
        proc = sidecar(repo, remote, interval=3600)
        stopped.append(proc)
        deadline = time.monotonic() + 30
        while not status_file.exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.001)
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            pytest.fail(f"attempt {attempt}: the sidecar kept waiting after SIGTERM")
        assert proc.returncode == 0
