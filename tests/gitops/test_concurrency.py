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
