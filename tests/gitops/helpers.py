"""Small helpers over a real git repository for the GitOps tests."""

from __future__ import annotations

from pathlib import Path

from infra.gitops.git import Git


def git(repo: Path, *args: str) -> str:
    """git as a person runs it a moment after gpufleet wrote: once the background index update of its last
    commit is done (infra.gitops.git `_drain_later`; a person's `git commit` while it runs would fail on
    `index.lock` as with any other git running at the same instant)."""
    if (repo / ".git").is_dir():
        Git(repo).settle_index()
    return raw_git(repo, *args)


def raw_git(repo: Path, *args: str) -> str:
    """git at this very instant, not waiting for gpufleet's index update."""
    return Git(repo, author="A Human <human@example.test>").run("-c", "commit.gpgsign=false", *args)


def commits(repo: Path, ref: str = "HEAD") -> int:
    return int(git(repo, "rev-list", "--count", ref).strip())


def files_in_commit(repo: Path, commit: str = "HEAD") -> list[str]:
    return sorted(git(repo, "show", "--no-renames", "--name-only", "--format=", commit).split())


def status(repo: Path) -> str:
    """`git status` once gpufleet's index is up to date: a one-tenant commit leaves the index to a drainer
    that runs right after it (infra.gitops.git `_drain_later`); this waits for it, as an operator's
    `git status` a moment later would."""
    return git(repo, "status", "--porcelain")


def config_map(owner: str, name: str, **data: str) -> dict:
    """A small manifest; its namespace follows the owner like rendered tenant objects do."""
    namespace = f"tenant-{owner.split(':', 1)[1]}" if owner.startswith("tenant:") else "gpufleet-system"
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": dict(data),
    }


def renders(monkeypatch) -> list[str]:
    """The slugs the fleet pass renders from now on (tenants.fleet.render_placed), in order."""
    from tenants import fleet

    calls: list[str] = []
    original = fleet.render_placed

    def counting(view, ctx):  # type: ignore[no-untyped-def]
        calls.append(view.slug)
        return original(view, ctx)

    monkeypatch.setattr(fleet, "render_placed", counting)
    return calls
