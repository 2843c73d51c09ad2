"""Applies from two processes at once (two Celery workers) both land: the repository lock serialises them."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from infra.gitops import GitOpsBackend
from tests.support.services import need_binary

from .helpers import config_map, git, status


def _apply_many_times(repo: str, slug: str, rounds: int) -> None:
    backend = GitOpsBackend(repo)
    owner = f"tenant:{slug}"
    for i in range(rounds):
        backend.apply(owner, [config_map(owner, "queue", round=str(i))], message=f"{slug} round {i}")


def test_two_processes_applying_different_tenants_both_land(tmp_path: Path) -> None:
    need_binary("git")
    repo = tmp_path / "repo"
    GitOpsBackend(repo).apply("platform", [config_map("platform", "seed", x="1")])  # create the repository
    ctx = multiprocessing.get_context("spawn")
    rounds = 8
    workers = [ctx.Process(target=_apply_many_times, args=(str(repo), slug, rounds)) for slug in ("acme", "beta")]
    for proc in workers:
        proc.start()
    for proc in workers:
        proc.join(120)
        assert proc.exitcode == 0

    log = git(repo, "log", "--format=%s").splitlines()
    assert sum(line.startswith("acme round") for line in log) == rounds
    assert sum(line.startswith("beta round") for line in log) == rounds
    assert status(repo) == ""
    for slug in ("acme", "beta"):
        text = (repo / f"tenants/{slug}/configmap.core_tenant-{slug}_queue.yaml").read_text()
        assert f"round: '{rounds - 1}'" in text


def _die_inside_a_batch(repo: str) -> None:
    import os

    backend = GitOpsBackend(repo)
    with backend.batch("fleet reconcile"):
        backend.apply("tenant:acme", [config_map("tenant:acme", "queue", gpus="4")])
        os._exit(3)  # a killed worker: files written, batch commit never made


def test_a_batch_killed_before_its_commit_is_committed_by_the_next_apply(tmp_path: Path) -> None:
    need_binary("git")
    repo = tmp_path / "repo"
    GitOpsBackend(repo).apply("platform", [config_map("platform", "seed", x="1")])
    proc = multiprocessing.get_context("spawn").Process(target=_die_inside_a_batch, args=(str(repo),))
    proc.start()
    proc.join(60)
    assert proc.exitcode == 3
    written = repo / "tenants/acme/configmap.core_tenant-acme_queue.yaml"
    assert written.exists() and status(repo) != ""  # written, not committed

    # Any later apply (here: another tenant's) first commits what the dead batch left behind.
    GitOpsBackend(repo).apply("tenant:beta", [config_map("tenant:beta", "queue", gpus="1")])

    assert status(repo) == ""
    log = git(repo, "log", "--format=%s").splitlines()
    assert "gpufleet: commit the changes of an interrupted batch" in log
    assert GitOpsBackend(repo).in_sync("tenant:acme", [config_map("tenant:acme", "queue", gpus="4")])


def test_batch_commits_once_and_reports_drift(tmp_path: Path) -> None:
    need_binary("git")
    backend = GitOpsBackend(tmp_path / "repo")
    with backend.batch("fleet reconcile: 3 tenants"):
        for slug in ("a", "b", "c"):
            result = backend.apply(f"tenant:{slug}", [config_map(f"tenant:{slug}", "queue", gpus="1")])
            assert result.created and result.revision is None  # committed when the batch ends
    assert git(backend.path, "log", "--format=%s").splitlines() == [
        "fleet reconcile: 3 tenants",
        "gpufleet: initialise desired-state repository",
    ]
    (backend.path / "tenants/b/configmap.core_tenant-b_queue.yaml").write_text("x: 1\n")
    git(backend.path, "commit", "-q", "-am", "by hand")
    with backend.batch("fleet sync"):
        for slug in ("a", "b", "c"):
            backend.apply(f"tenant:{slug}", [config_map(f"tenant:{slug}", "queue", gpus="1")])
    assert git(backend.path, "log", "-1", "--format=%s").strip() == "fleet sync: repair drift (1 objects)"
